"""Gathering ``decide``'s inputs from one observation and the state store (reads only).

* instances: the providers' alive, tagged instances, with the latest interruption notice the
  node agent recorded for each (``interruption-notice`` events; ``outbid`` notices mark Vast
  outbids), starting while the provider reports them pending;
* pool events: ``preempted`` endings (interrupted) and ``blocked`` capacity failures
  (no capacity), at their provider-clock times;
* exposure: every instance record of the fleet, alive ones counted until ``now``;
* policy state: the time of the last return to spot, from the recorded ``rebalance`` events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fleet.model import TAG_ROLE, WORKER, InstanceState
from fleet.provisioning.reconcile import Observation
from fleet.rebalance.learning import exposure_of
from fleet.rebalance.types import INTERRUPTED, NO_CAPACITY, Exposure, ObservedInstance, PolicyState, PoolEvent
from fleet.state import EventKind, StateStore
from providers.base import Provider, RaisesBids

#: The event kind each applied rebalancer action is recorded under (shown by ``fleet history``).
EVENT_KIND = "rebalance"
OUTBID = "outbid"


@dataclass(frozen=True)
class Inputs:
    instances: list[ObservedInstance]
    events: list[PoolEvent]
    exposure: dict[str, Exposure]
    state: PolicyState
    bidding: frozenset[str]
    now: float


def fleet_exposure(store: StateStore, fleet: str, now: float) -> dict[str, Exposure]:
    """Pool id -> instance-hours and interruptions over every instance record of ``fleet``
    (alive ones counted until ``now``, on the providers' clock)."""
    return exposure_of(
        ((r.pool, r.launched_at, r.ended_at, r.end_reason == EventKind.PREEMPTED) for r in store.instances(fleet)), now
    )


def gather(obs: Observation, store: StateStore | None, providers: Mapping[str, Provider]) -> Inputs:
    """``decide``'s inputs for ``obs.fleet``; ``store`` ``None`` (no store yet) reads as empty."""
    fleet = obs.fleet
    now = max(obs.now.values(), default=0.0)
    events = store.events(fleet) if store is not None else []
    notices: dict[str, str] = {}
    pool_events: list[PoolEvent] = []
    last_return = None
    for e in events:  # oldest first: the latest notice per instance wins
        if e.kind == EventKind.NOTICE and e.instance_id:
            notices[e.instance_id] = str(e.detail.get("kind", "terminate"))
        elif e.kind == EventKind.PREEMPTED and e.pool:
            pool_events.append(PoolEvent(e.pool, INTERRUPTED, e.ts))
        elif e.kind == EventKind.BLOCKED and e.detail.get("kind") == "capacity" and e.pool.count("/") == 4:
            pool_events.append(PoolEvent(e.pool, NO_CAPACITY, e.ts))
        elif e.kind == EVENT_KIND and e.detail.get("reason") == "return-to-spot" and e.detail.get("done"):
            last_return = e.ts
    instances = []
    for i in obs.instances:
        notice = notices.get(i.id, "")
        instances.append(
            ObservedInstance(
                id=i.id,
                pool=i.pool.id,
                market=i.pool.market,
                accelerator=i.accelerator,
                gpus=i.gpus,
                price_per_hour=i.price_per_hour,
                launched_at=i.launched_at,
                notice="" if notice == OUTBID else notice,
                outbid=notice == OUTBID,
                role=i.tags.get(TAG_ROLE, WORKER),
                starting=i.state is InstanceState.PENDING,
            )
        )
    exposure = fleet_exposure(store, fleet, now) if store is not None else {}
    bidding = frozenset(n for n, p in providers.items() if isinstance(p, RaisesBids))
    return Inputs(
        instances=instances,
        events=pool_events,
        exposure=exposure,
        state=PolicyState(last_return_at=last_return),
        bidding=bidding,
        now=now,
    )
