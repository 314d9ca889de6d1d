"""Launching one round of shortfall, pool by pool in parallel (used only by ``fleet.provisioning.executor``).

Per pool, first every launch a crash left unfinished under the same plan is replayed with
its own token (the provider returns what that token already created, or creates it now),
then the remaining shortfall is launched under a fresh token that is recorded in the
store before the call. Instances a call returns are recorded with ``launched`` events.
Provider errors become ``LaunchOutcome.error_kind``; nothing here raises ProviderError.

A provider with the ability ``providers.base.LaunchesGroups`` (``launch_group(requests)``)
gets all of its pools' requests of the round in one call instead (an Azure scale set per region).
Such a provider sizes what it launches from what exists, so launches a crash left unfinished are
abandoned rather than replayed: what they made is listed, and each pool gets one fresh token for
its remaining shortfall.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from fleet import crashpoints
from fleet.errors import ERROR_KINDS, RETRYABLE_KINDS, ProviderError, error_kind  # noqa: F401  (re-exported)
from fleet.model import TAG_ROLE, WORKER, Instance, LaunchRequest, LaunchResult, Market, NodeConfig, Offer, fleet_tags
from fleet.provisioning.reconcile import Observation
from fleet.state import EventKind, LaunchRecord, LaunchStatus, StateStore
from providers.base import LaunchesGroups, Provider

#: Kinds whose launch stays replayable with the same token on the next run (``fleet.errors``).
RETRYABLE = RETRYABLE_KINDS


@dataclass(frozen=True)
class Progress:
    """One step, for a progress display: ``kind`` is round|launch|launched|terminate|block|replan|note."""

    kind: str
    pool: str = ""
    count: int = 0
    total: int = 0
    message: str = ""


ProgressFn = Callable[[Progress], None]


@dataclass
class LaunchOutcome:
    """What one pool's launches in one round produced."""

    pool: str
    requested: int
    instances: list[Instance] = field(default_factory=list)  # newly alive, ours
    error_kind: str = ""
    error_code: str = ""
    error_message: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "pool": self.pool,
            "requested": self.requested,
            "launched": len(self.instances),
            "error_kind": self.error_kind,
            "error_code": self.error_code,
            "error_message": self.error_message,
        }


class PoolLauncher:
    """Launches shortfall for one fleet; ``token(fleet, plan_id, pool, seq)`` names each launch."""

    def __init__(
        self,
        fleet: str,
        providers: Mapping[str, Provider],
        store: StateStore,
        *,
        token: Callable[[str, str, str, int], str],
        say: ProgressFn,
        node: NodeConfig | None = None,
        role_nodes: Mapping[str, NodeConfig] | None = None,
    ):
        self.fleet = fleet
        self.providers = providers
        self.store = store
        self.token = token
        self.say = say
        self.node = node or NodeConfig()
        #: What a role other than ``worker`` runs (``head``), and each pool's role in the plan.
        self.role_nodes = dict(role_nodes or {})
        self.roles: dict[str, str] = {}
        #: The low-latency group the plan's nodes join (``LaunchRequest.interconnect``); "" for none.
        self.interconnect = ""

    def run(
        self,
        plan_id: str,
        desired: Mapping[str, int],
        offers: Mapping[str, Offer],
        obs: Observation,
        *,
        replay: bool,
        max_workers: int,
    ) -> list[LaunchOutcome]:
        counts = obs.counts()
        pending = self._pending(plan_id, desired, counts, obs) if replay else {}
        jobs = []
        for pool_id, want in sorted(desired.items()):
            short = want - counts.get(pool_id, 0)
            provider = pool_id.split("/", 1)[0]
            if short <= 0 or not obs.listed(provider):
                continue
            jobs.append((pool_id, short, offers[pool_id], pending.get(pool_id, [])))
        for pool_id, short, _, _ in jobs:
            self.say(Progress("launch", pool=pool_id, count=short, message=f"launching {short}"))
        if not jobs:
            return []
        known = {i.id for i in obs.instances}
        groups: dict[str, list[tuple]] = {}
        tasks: list[Callable[[], list[LaunchOutcome]]] = []
        for job in jobs:
            provider = self.providers.get(job[2].pool.provider)
            if isinstance(provider, LaunchesGroups):
                groups.setdefault(job[2].pool.provider, []).append(job)
            else:
                tasks.append(lambda job=job: [self._pool(plan_id, *job, known=known)])
        for name, group in sorted(groups.items()):
            tasks.append(lambda name=name, group=group: self._group(plan_id, self.providers[name], group, known))
        with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(tasks)))) as ex:
            return [out for outs in ex.map(lambda task: task(), tasks) for out in outs]

    def _group(self, plan_id: str, provider: Provider, jobs: list[tuple], known: set[str]) -> list[LaunchOutcome]:
        """All of one provider's pools in one ``launch_group`` call (see the module doc)."""
        launches, requests = [], []
        for pool_id, short, offer, replays in jobs:
            for old in replays:
                self.store.finish_launch(
                    old.id,
                    status=LaunchStatus.ABANDONED,
                    launched=0,
                    error_message="left unfinished by an earlier run; its provider launches from what exists",
                )
            launch = self.store.begin_launch(
                self.fleet,
                plan_id,
                pool_id,
                short,
                lambda seq, pool_id=pool_id: self.token(self.fleet, plan_id, pool_id, seq),
            )
            launches.append(launch)
            requests.append(self._request(plan_id, offer, launch))
        crashpoints.reached("launch-recorded")
        outcomes = [LaunchOutcome(pool=pool_id, requested=short) for pool_id, short, _, _ in jobs]
        try:
            results = provider.launch_group(requests)  # type: ignore[attr-defined]
            crashpoints.reached("launch-sent")
        except ProviderError as err:
            for launch, outcome in zip(launches, outcomes):
                self._failed(launch, outcome, err)
        else:
            for (_, _, offer, _), launch, outcome, result in zip(jobs, launches, outcomes, results):
                self._record(offer, launch, outcome, result, known)
        for outcome in outcomes:
            self.say(
                Progress(
                    "launched",
                    pool=outcome.pool,
                    count=len(outcome.instances),
                    total=outcome.requested,
                    message=outcome.error_message,
                )
            )
        return outcomes

    def _pending(
        self, plan_id: str, desired: Mapping[str, int], counts: Mapping[str, int], obs: Observation
    ) -> dict[str, list[LaunchRecord]]:
        """Unfinished launches to replay, by pool; the rest (other plans, unwanted pools) are abandoned."""
        out: dict[str, list[LaunchRecord]] = {}
        for launch in self.store.launches(self.fleet, status=LaunchStatus.REQUESTED):
            if not obs.listed(launch.pool.split("/", 1)[0]):
                continue
            if launch.plan_id == plan_id and desired.get(launch.pool, 0) > counts.get(launch.pool, 0):
                out.setdefault(launch.pool, []).append(launch)
            else:
                self.store.finish_launch(
                    launch.id,
                    status=LaunchStatus.ABANDONED,
                    launched=0,
                    error_message="left unfinished by an earlier run; its pool needs no more",
                )
        return out

    def _pool(
        self, plan_id: str, pool_id: str, short: int, offer: Offer, replays: list[LaunchRecord], *, known: set[str]
    ) -> LaunchOutcome:
        outcome = LaunchOutcome(pool=pool_id, requested=short)
        provider = self.providers.get(offer.pool.provider)
        if provider is None:
            outcome.error_kind, outcome.error_message = "error", f"no provider {offer.pool.provider!r} configured"
            return outcome
        for launch in replays:
            self._call(provider, plan_id, offer, launch, outcome, known)
            if outcome.error_kind:
                break
        remaining = short - len(outcome.instances)
        if remaining > 0 and not outcome.error_kind:
            launch = self.store.begin_launch(
                self.fleet, plan_id, pool_id, remaining, lambda seq: self.token(self.fleet, plan_id, pool_id, seq)
            )
            crashpoints.reached("launch-recorded")
            self._call(provider, plan_id, offer, launch, outcome, known)
        self.say(
            Progress("launched", pool=pool_id, count=len(outcome.instances), total=short, message=outcome.error_message)
        )
        return outcome

    def _request(self, plan_id: str, offer: Offer, launch: LaunchRecord) -> LaunchRequest:
        role = self.roles.get(offer.pool.id, WORKER)
        tags = fleet_tags(self.fleet, offer.pool, plan_id) | ({TAG_ROLE: role} if role != WORKER else {})
        return LaunchRequest(
            fleet=self.fleet,
            offer=offer,
            count=launch.count,
            token=launch.token,
            tags=tags,
            node=self.role_nodes.get(role, self.node),
            interconnect=self.interconnect if role == WORKER else "",
        )

    def _call(
        self,
        provider: Provider,
        plan_id: str,
        offer: Offer,
        launch: LaunchRecord,
        outcome: LaunchOutcome,
        known: set[str],
    ) -> None:
        try:
            result: LaunchResult = provider.launch(self._request(plan_id, offer, launch))
            crashpoints.reached("launch-sent")
        except ProviderError as err:
            self._failed(launch, outcome, err)
            return
        self._record(offer, launch, outcome, result, known)

    def _failed(self, launch: LaunchRecord, outcome: LaunchOutcome, err: ProviderError) -> None:
        kind = error_kind(err)
        status = LaunchStatus.REQUESTED if kind in RETRYABLE else LaunchStatus.FAILED
        self.store.finish_launch(launch.id, status=status, launched=0, error_kind=kind, error_message=str(err))
        outcome.error_kind, outcome.error_code, outcome.error_message = kind, err.code, str(err)

    def _record(
        self, offer: Offer, launch: LaunchRecord, outcome: LaunchOutcome, result: LaunchResult, known: set[str]
    ) -> None:
        """Record what one launch returned (instances, events, the launch's end) in the store and ``outcome``."""
        plan_id = launch.plan_id
        fresh = [i for i in result.instances if i.state.alive and i.id not in known]
        known.update(i.id for i in fresh)
        od = offer.on_demand_price if offer.market is Market.SPOT else offer.price_per_hour
        self.store.record_instances(
            self.fleet, fresh, on_demand_prices={offer.pool.id: od} if od else {}, plan_id=plan_id
        )
        crashpoints.reached("instances-recorded")
        self.store.record_events(
            (self.fleet, EventKind.LAUNCHED, i.id, i.pool.id, {"token": launch.token}, i.launched_at) for i in fresh
        )
        self.store.finish_launch(
            launch.id,
            status=LaunchStatus.DONE,
            launched=len(result.instances),
            error_kind=result.error_kind,
            error_message=result.error_message,
        )
        crashpoints.reached("launch-finished")
        outcome.instances.extend(fresh)
        if result.error_kind:
            outcome.error_kind, outcome.error_code = result.error_kind, result.error_code
            outcome.error_message = result.error_message
