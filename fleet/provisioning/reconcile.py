"""Reconciling the state store with what the providers report (the providers are the truth).

``observe`` asks every provider for the fleet's instances (by tag) and its clock;
``sync`` brings the store in line: instances found by tag but not recorded are added
(``discovered``), recorded instances a provider no longer reports as alive are ended (spot:
``preempted``, on-demand: ``lost``; a stopped one, such as an outbid Vast instance, carries the
provider's reason and time) at the time the provider gives for their end (a listed ended
instance's ``ended_at``, as EC2 and GCE tell it, else ``Provider.ended_at``), else at the
deadline of their interruption notice where the node agent recorded one, else at the
observation time (an upper bound: the bill never comes out lower than the provider's); the
ending event keeps that observation time as ``detected_at`` (the interruption timeline's time
to detect). A provider whose listing failed is left alone:
its instances are neither added nor ended. Alive instances whose billed rate was not read yet
(or all of them with ``refresh_bills``) are priced by their providers
(``fleet.provisioning.billing.read_back``: after each launch round's look, the first reconcile
that sees an instance records what it bills).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from fleet.errors import ProviderError
from fleet.model import TAG_FLEET, Instance, InstanceState, Market, Plan
from fleet.provisioning import billing
from fleet.state import EventKind, InstanceRecord, StateStore
from providers.base import DatesEndings, Provider


@dataclass
class Observation:
    """One look at a fleet across providers."""

    fleet: str
    instances: list[Instance] = field(default_factory=list)  # alive, carrying this fleet's tag
    stopped: list[Instance] = field(default_factory=list)  # paused but still billing (Vast outbid)
    now: dict[str, float] = field(default_factory=dict)  # provider -> its clock at the look
    errors: dict[str, str] = field(default_factory=dict)  # provider -> why listing failed
    ended: dict[str, float] = field(default_factory=dict)  # instance id -> end time a listing gave
    providers: Mapping[str, Provider] = field(default_factory=dict, repr=False)  # who was asked

    def ended_at(self, records: list[InstanceRecord]) -> dict[str, float]:
        """Instance id -> when its provider says it ended (on the provider's clock), where it can say:
        from the listing itself, else from ``DatesEndings.ended_at``."""
        out: dict[str, float] = {r.id: self.ended[r.id] for r in records if r.id in self.ended}
        by_provider: dict[str, list[str]] = {}
        for r in records:
            if r.id not in out:
                by_provider.setdefault(r.provider, []).append(r.id)
        for name, ids in sorted(by_provider.items()):
            provider = self.providers.get(name)
            if not isinstance(provider, DatesEndings):
                continue
            try:
                out.update(provider.ended_at(ids))
            except ProviderError:
                continue  # dated by the look instead, as without an answer
        return out

    def counts(self) -> dict[str, int]:
        """Alive instances per pool id."""
        out: dict[str, int] = {}
        for inst in self.instances:
            out[inst.pool.id] = out.get(inst.pool.id, 0) + 1
        return out

    def by_pool(self) -> dict[str, list[Instance]]:
        out: dict[str, list[Instance]] = {}
        for inst in self.instances:
            out.setdefault(inst.pool.id, []).append(inst)
        return out

    def listed(self, provider: str) -> bool:
        """Whether ``provider`` answered (its counts can be trusted)."""
        return provider in self.now

    def clock(self, provider: str) -> float:
        if provider in self.now:
            return self.now[provider]
        return max(self.now.values()) if self.now else 0.0


@dataclass
class SyncResult:
    discovered: list[Instance] = field(default_factory=list)
    ended: list[tuple[InstanceRecord, str]] = field(default_factory=list)  # (record, reason)


def observe(providers: Mapping[str, Provider], fleet: str) -> Observation:
    """List ``fleet``'s alive instances on every provider, in parallel; never raises ProviderError."""
    obs = Observation(fleet, providers=providers)

    def look(item: tuple[str, Provider]) -> tuple[str, float | None, list[Instance], str]:
        name, provider = item
        try:
            found = provider.list_instances(fleet)
            return name, provider.now(), found, ""
        except ProviderError as err:
            return name, None, [], str(err)

    items = sorted(providers.items())
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(items)))) as pool:
        for name, now, found, error in pool.map(look, items):
            if now is None:
                obs.errors[name] = error
                continue
            obs.now[name] = now
            # defence in depth: a provider must only return tagged instances, but never trust it
            ours = [i for i in found if i.tags.get(TAG_FLEET) == fleet]
            obs.instances.extend(i for i in ours if i.state.alive)
            obs.stopped.extend(i for i in ours if i.state is InstanceState.STOPPED)
            obs.ended.update(
                {
                    i.id: i.ended_at
                    for i in ours
                    if not i.state.alive and i.state is not InstanceState.STOPPED and i.ended_at is not None
                }
            )
    return obs


def on_demand_prices(plans: list[Plan | None]) -> dict[str, float]:
    """Pool id -> on-demand price of the same instance type, from the plans' offers."""
    out: dict[str, float] = {}
    for plan in plans:
        for a in plan.allocations if plan else ():
            o = a.offer
            price = o.price_per_hour if o.market is Market.ON_DEMAND else o.on_demand_price
            if price is not None:
                out[o.pool.id] = price
    return out


def _with_catalog_prices(fresh: list[Instance], prices: dict[str, float]) -> dict[str, float]:
    """``prices`` (from the plans), completed from the catalog snapshot for the pools of ``fresh``
    no plan priced: an instance found by tag keeps an on-demand reference, so its savings count."""
    missing = {i.pool.id for i in fresh} - set(prices)
    if not missing:
        return prices
    from fleet.catalog import on_demand_reference  # only when a pool is unpriced: status stays light

    return {**on_demand_reference(missing), **prices}


def sync(
    store: StateStore, obs: Observation, *, prices: dict[str, float] | None = None, refresh_bills: bool = False
) -> SyncResult:
    """Record what ``obs`` shows: new instances are added, vanished ones ended, bills read (see module doc)."""
    fleet = obs.fleet
    recorded = {r.id: r for r in store.instances(fleet, alive_only=True)}
    seen = {i.id for i in obs.instances}
    result = SyncResult()
    fresh = [i for i in obs.instances if i.id not in recorded]
    if fresh:  # ignore ids recorded as ended: an instance is ended once
        ever = {r.id for r in store.instances(fleet)}
        fresh = [i for i in fresh if i.id not in ever]
    if fresh:
        store.record_instances(fleet, fresh, on_demand_prices=_with_catalog_prices(fresh, prices or {}))
        store.record_events(
            (fleet, EventKind.DISCOVERED, i.id, i.pool.id, {"state": i.state.value}, i.launched_at) for i in fresh
        )
        result.discovered = fresh
    ended: dict[str, tuple[float, str]] = {}
    detected: dict[str, float] = {}  # when this look saw it gone (the timeline's time to detect)
    vanished = [rec for rid, rec in recorded.items() if rid not in seen and obs.listed(rec.provider)]
    deadlines = _notice_deadlines(store, fleet) if vanished else {}
    told = obs.ended_at(vanished) if vanished else {}
    stopped = {i.id: i for i in obs.stopped}
    for rec in vanished:
        reason = EventKind.PREEMPTED if rec.market == Market.SPOT.value else EventKind.LOST
        seen_gone = obs.clock(rec.provider)
        when = told.get(rec.id, deadlines.get(rec.id))
        if rec.id in stopped and stopped[rec.id].ended_at is not None:  # the provider dated the stop
            when = stopped[rec.id].ended_at
        at = when if when is not None and rec.launched_at <= when <= seen_gone else seen_gone
        ended[rec.id] = (at, reason)
        detected[rec.id] = seen_gone
        result.ended.append((rec, reason))
    if ended:
        store.end_instances(fleet, ended)
        store.record_events(
            (
                fleet,
                reason,
                rid,
                recorded[rid].pool,
                {
                    "detected_at": detected[rid],
                    **({"reason": stopped[rid].reason} if rid in stopped and stopped[rid].reason else {}),
                },
                ts,
            )
            for rid, (ts, reason) in ended.items()
        )
    to_price = obs.instances if refresh_bills else billing.unread(store, fleet, obs.instances)
    if to_price:
        billing.read_back(store, obs.providers, fleet, to_price)
    return result


def _notice_deadlines(store: StateStore, fleet: str) -> dict[str, float]:
    """Instance id -> the deadline of its interruption notice (recorded by the node agent),
    on the provider's clock: the local cloud's own ``time`` (its clock may run faster than
    the wall clock the agent's ``deadline`` is on), else the notice's ``deadline``. Early
    advice (AWS rebalance recommendations) dates nothing: the instance may live on for hours."""
    out = {}
    for e in store.events(fleet, kinds={EventKind.NOTICE}):
        if e.detail.get("kind") == "rebalance":
            continue
        raw = e.detail.get("detail")
        local = raw.get("time") if e.detail.get("cloud") == "local" and isinstance(raw, dict) else None
        deadline = local if local is not None else e.detail.get("deadline")
        if e.instance_id and isinstance(deadline, (int, float)):
            out[e.instance_id] = float(deadline)
    return out
