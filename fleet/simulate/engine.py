"""The virtual clock: replay a market through a policy and account for what it costs (pure).

The model (stated in the README):

* Time moves in the traces' ticks. A policy acts at the start of every ``interval_ticks``-th
  tick; a launch that finds no capacity is a ``no-capacity`` pool event and the policy is
  asked again within the same pass (as ``fleet rebalance`` re-decides a shortfall), at most
  ``MAX_ROUNDS`` times.
* A node launched at tick ``t`` is paid from ``t`` for every tick it is alive and is ready
  (does work) from the first tick starting at least ``cold_ticks`` ticks later.
* A spot node is lost at the start of a tick where its pool holds fewer instances than the
  fleet runs there: all of them when the zone is unavailable, in a count trace the excess,
  picked by the seeded random generator. On-demand is always available.
* A termination with ``after`` pools (make before break) waits until the nodes launched there
  in the same pass are ready; it is dropped if one of them is lost first
  (``fleet.provisioning.executor.may_break``, the rule ``fleet rebalance`` applies).
* Work lost by an interrupted ready node: the work since its last checkpoint, with the
  checkpoint interval the planner recommends for the pool's catalog rate (``economics``);
  nothing while it was still starting.
* Shares of time are counted from tick ``cold_ticks`` (no fleet can be ready earlier).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence

from fleet.model import Market, Offer
from fleet.planning import economics
from fleet.provisioning.executor import may_break
from fleet.rebalance.types import Action, Exposure, Launch, ObservedInstance, PoolEvent, Terminate
from fleet.simulate.market import Replay
from fleet.spec import FleetSpec

MAX_ROUNDS = 5
EPS = 1e-9


@dataclass(frozen=True)
class View:
    """What a policy sees at one pass: the time, the fleet's alive nodes, recent pool events
    (interruptions and failed launches, this pass's included) and the exposure per pool."""

    now: float
    instances: tuple[ObservedInstance, ...]
    events: tuple[PoolEvent, ...]
    exposure: Mapping[str, Exposure]
    pending: frozenset[str] = frozenset()     # ids already due to be terminated
    ready: frozenset[str] = frozenset()       # ids past their cold start (doing work)


class Policy(Protocol):
    name: str

    def act(self, view: View) -> Sequence[Action]:
        """Launches and terminations for this pass (``fleet.rebalance`` action types)."""
        ...


@dataclass(frozen=True)
class PoolFigures:
    hours: float
    interruptions: int
    predicted: float       # the catalog rate times the spot hours run there


@dataclass(frozen=True)
class Outcome:
    """What one policy did over the replay (money in USD, time shares in [0, 1])."""

    policy: str
    at_target: float
    at_critical: float
    cost: float
    interruptions: int
    work_lost_gpu_hours: float
    on_demand_node_hours: float
    spot_node_hours: float
    launches: int
    failed_launches: int
    max_spend_per_hour: float
    pools: Mapping[str, PoolFigures] = field(default_factory=dict)
    ready_series: tuple[float, ...] = ()
    cost_series: tuple[float, ...] = ()       # cumulative cost at the end of each tick
    on_demand_series: tuple[float, ...] = ()  # weighted GPUs alive on on-demand per tick
    spot_series: tuple[float, ...] = ()       # weighted GPUs alive on spot per tick


@dataclass
class _Node:
    id: str
    offer: Offer
    weight: float
    launched: int
    ready_tick: int
    checkpoint_seconds: float | None


def run(policy: Policy, spec: FleetSpec, replay: Replay, *, interval_ticks: int = 1, cold_ticks: int = 1,
        seed: int = 0, target: float | None = None, keep_series: bool = False,
        progress: Callable[[int, int], None] | None = None) -> Outcome:
    """Replay ``replay`` through ``policy``; ``target`` defaults to the spec's (the level that
    counts as "at target", which a policy planning spare nodes exceeds). ``progress(done,
    ticks)`` is called after each simulated day and at the end."""
    rng = random.Random(seed)
    gap = replay.tick_seconds
    target = float(spec.capacity.gpus) if target is None else target
    critical = max(spec.critical_gpus, 0.0)
    alive: dict[str, _Node] = {}
    waiting: list[tuple[str, tuple[str, ...]]] = []     # (node to terminate, nodes that must be ready first)
    events: list[PoolEvent] = []
    hours: dict[str, float] = {}
    lost_in: dict[str, int] = {}
    seq = 0
    cost = work_lost = od_hours = spot_hours = max_spend = 0.0
    launches = failed = interruptions = 0
    at_target = at_critical = measured = 0
    ready_s: list[float] = []
    cost_s: list[float] = []
    od_s: list[float] = []
    spot_s: list[float] = []
    memory = spec.rebalance.backoff_memory_seconds

    for t in range(replay.ticks):
        now = t * gap
        # 1. the market takes back what its pools no longer hold
        by_pool: dict[str, list[_Node]] = {}
        for node in alive.values():
            by_pool.setdefault(node.offer.pool.id, []).append(node)
        for pool, nodes in sorted(by_pool.items()):
            cap = replay.cap(pool, t)
            if cap is None or len(nodes) <= cap:
                continue
            victims = nodes if cap == 0 else rng.sample(sorted(nodes, key=lambda n: n.id), len(nodes) - cap)
            for node in victims:
                del alive[node.id]
                interruptions += 1
                lost_in[pool] = lost_in.get(pool, 0) + 1
                if t >= node.ready_tick and node.checkpoint_seconds:
                    work_lost += node.weight * (((t - node.ready_tick) * gap) % node.checkpoint_seconds) / 3600
            events.append(PoolEvent(pool, "interrupted", now))
        # 2. make-before-break terminations whose replacements are ready (or lost)
        still = []
        ready_now = {n.id for n in alive.values() if n.ready_tick <= t}
        for victim, needs in waiting:
            verdict = may_break(needs, alive, ready_now) if victim in alive else None
            if verdict:
                del alive[victim]
            elif verdict is not None:
                still.append((victim, needs))
        waiting = still
        # 3. the policy's pass
        if t % interval_ticks == 0:
            events = [e for e in events if e.at >= now - memory]
            for _ in range(MAX_ROUNDS):
                view = View(now=now, instances=tuple(_observed(n, gap, t) for n in alive.values()),
                            events=tuple(events), exposure=_exposure(hours, lost_in),
                            pending=frozenset(v for v, _ in waiting),
                            ready=frozenset(n.id for n in alive.values() if n.ready_tick <= t))
                actions = policy.act(view)
                new_by_pool: dict[str, list[str]] = {}
                short = False
                for a in actions:
                    if not isinstance(a, Launch):
                        continue
                    pool = a.offer.pool.id
                    cap = replay.cap(pool, t)
                    running = sum(1 for n in alive.values() if n.offer.pool.id == pool)
                    room = a.count if cap is None else max(0, min(a.count, cap - running))
                    for _k in range(room):
                        seq += 1
                        node = _Node(f"n{seq}", a.offer, spec.weight(a.offer.accelerator) * a.offer.gpus, t,
                                     t + cold_ticks, _checkpoint(a.offer, spec))
                        alive[node.id] = node
                        new_by_pool.setdefault(pool, []).append(node.id)
                    launches += room
                    if room < a.count:
                        failed += a.count - room
                        short = True
                        events.append(PoolEvent(pool, "no-capacity", now))
                for a in actions:
                    if isinstance(a, Terminate) and a.instance_id in alive:
                        needs = tuple(i for p in a.after for i in new_by_pool.get(p, ()))
                        if not a.after:
                            del alive[a.instance_id]
                        elif needs and all(p in new_by_pool for p in a.after):
                            waiting.append((a.instance_id, needs))
                if not short:
                    break
        # 4. accounting for tick t
        spend = sum(n.offer.price_per_hour for n in alive.values())
        max_spend = max(max_spend, spend)
        cost += spend * gap / 3600
        ready = sum(n.weight for n in alive.values() if n.ready_tick <= t)
        od_w = spot_w = 0.0
        for n in alive.values():
            pool = n.offer.pool.id
            hours[pool] = hours.get(pool, 0.0) + gap / 3600
            if n.offer.market is Market.ON_DEMAND:
                od_hours += gap / 3600
                od_w += n.weight
            else:
                spot_hours += gap / 3600
                spot_w += n.weight
        if t >= cold_ticks:
            measured += 1
            at_target += ready >= target - EPS
            at_critical += ready >= critical - EPS
        if progress is not None and ((t + 1) % max(1, 86400 // gap) == 0 or t + 1 == replay.ticks):
            progress(t + 1, replay.ticks)
        if keep_series:
            ready_s.append(ready)
            cost_s.append(cost)
            od_s.append(od_w)
            spot_s.append(spot_w)
    rates = {o.pool.id: o.interruptions_per_hour for o in replay.offers}
    pools = {p: PoolFigures(h, lost_in.get(p, 0), rates.get(p, 0.0) * h) for p, h in sorted(hours.items())
             if p in replay.capacity}
    return Outcome(policy=policy.name, at_target=at_target / measured if measured else 0.0,
                   at_critical=at_critical / measured if measured else 0.0, cost=cost,
                   interruptions=interruptions, work_lost_gpu_hours=work_lost, on_demand_node_hours=od_hours,
                   spot_node_hours=spot_hours, launches=launches, failed_launches=failed,
                   max_spend_per_hour=max_spend, pools=pools, ready_series=tuple(ready_s),
                   cost_series=tuple(cost_s), on_demand_series=tuple(od_s), spot_series=tuple(spot_s))


def _observed(node: _Node, gap: int, tick: int) -> ObservedInstance:
    o = node.offer
    return ObservedInstance(id=node.id, pool=o.pool.id, market=o.market, accelerator=o.accelerator, gpus=o.gpus,
                            price_per_hour=o.price_per_hour, launched_at=float(node.launched * gap),
                            starting=tick < node.ready_tick)


def _exposure(hours: Mapping[str, float], lost: Mapping[str, int]) -> dict[str, Exposure]:
    return {p: Exposure(h, lost.get(p, 0)) for p, h in hours.items()}


def _checkpoint(offer: Offer, spec: FleetSpec) -> float | None:
    if offer.market is Market.ON_DEMAND:
        return None
    return economics.checkpoint_interval(offer.interruptions_per_hour, spec.workload)
