"""Holding what the providers bill to the plan, in a rebalancing pass (``budget.cap_action``).

``check(spec, store, obs, providers, now)`` runs after the pass reconciled the store and re-read
every alive instance's bill (``sync(..., refresh_bills=True)``). It finds the breaches
(``fleet.rebalance.bills``), records each one once as a ``bill-over-plan`` event (per
instance and kind, so a warning is not repeated every pass), and acts by ``cap_action``:

* ``warn``: nothing more (``fleet status`` shows the breach while it lasts);
* ``replace``: the breached instances are handed to ``decide`` with the advisory notice
  ``over-bill`` (``CapCheck.notices``): their pools are avoided, a replacement is launched, and
  once the rest covers the target they are terminated (make before break);
* ``destroy``: they are terminated now, each recorded as a done ``rebalance`` action (reason
  ``over-bill``), and their pools are backed off for this decision (``CapCheck.events``), so
  ``decide`` replaces the capacity elsewhere in the same pass.

A provider that refuses a termination leaves that instance running (the action is recorded as
not done, with the provider's message).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fleet.errors import ProviderError
from fleet.provisioning.executor import terminate
from fleet.provisioning.reconcile import Observation
from fleet.rebalance.bills import EVENT, NOTICE, Breach, Limits, breaches
from fleet.rebalance.types import NO_CAPACITY, PoolEvent, Terminate
from fleet.spec import FleetSpec
from fleet.state import StateStore
from providers.base import Provider


@dataclass
class CapCheck:
    """What the bill check found and did in one pass."""

    breaches: list[Breach] = field(default_factory=list)
    notices: dict[str, str] = field(default_factory=dict)  # instance id -> notice for decide (replace)
    events: list[PoolEvent] = field(default_factory=list)  # pools to back off this pass (destroy)
    destroyed: list[tuple[Terminate, bool, str]] = field(default_factory=list)  # (action, done, message)


def check(
    spec: FleetSpec, store: StateStore, obs: Observation, providers: Mapping[str, Provider], now: float
) -> CapCheck:
    """See the module doc."""
    alive = {i.id for i in obs.instances}
    limits = Limits(spec.budget.cap_action, spec.budget.bill_tolerance, spec.budget.max_per_node)
    found = breaches((r for r in store.instances(spec.name, alive_only=True) if r.id in alive), limits)
    out = CapCheck(breaches=found)
    if not found:
        return out
    seen = {(e.instance_id, e.detail.get("why")) for e in store.events(spec.name, kinds={EVENT})}
    store.record_events(
        (spec.name, EVENT, b.instance_id, b.pool, {**b.to_dict(), "action": spec.budget.cap_action}, now)
        for b in found
        if (b.instance_id, b.why) not in seen
    )
    action = spec.budget.cap_action
    if action == "replace":
        out.notices = {b.instance_id: NOTICE for b in found}
    elif action == "destroy":
        by_id = {i.id: i for i in obs.instances}
        for b in found:
            term = Terminate(b.instance_id, b.pool, "over-bill")
            try:
                terminate(
                    spec.name, providers[b.pool.split("/", 1)[0]], [by_id[b.instance_id]], store, reason="over-bill"
                )
            except ProviderError as err:
                out.destroyed.append((term, False, str(err)))
                continue
            out.destroyed.append((term, True, b.describe()))
            out.events.append(PoolEvent(b.pool, NO_CAPACITY, now))
    return out
