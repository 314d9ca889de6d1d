"""The virtual clock: replay a market through a policy and account for what it costs (pure).

The model (stated in docs/simulate.md):

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

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
    pending: frozenset[str] = frozenset()  # ids already due to be terminated
    ready: frozenset[str] = frozenset()  # ids past their cold start (doing work)


class Policy(Protocol):
    name: str

    def act(self, view: View) -> Sequence[Action]:
        """Launches and terminations for this pass (``fleet.rebalance`` action types)."""
        ...


@dataclass(frozen=True)
class PoolFigures:
    hours: float
    interruptions: int
    predicted: float  # the catalog rate times the spot hours run there


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
    cost_series: tuple[float, ...] = ()  # cumulative cost at the end of each tick
    on_demand_series: tuple[float, ...] = ()  # weighted GPUs alive on on-demand per tick
    spot_series: tuple[float, ...] = ()  # weighted GPUs alive on spot per tick


@dataclass
class _Node:
    id: str
    offer: Offer
    weight: float
    launched: int
    ready_tick: int
    checkpoint_seconds: float | None


def run(
    policy: Policy,
    spec: FleetSpec,
    replay: Replay,
    *,
    interval_ticks: int = 1,
    cold_ticks: int = 1,
    seed: int = 0,
    target: float | None = None,
    keep_series: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Outcome:
    """Replay ``replay`` through ``policy``; ``target`` defaults to the spec's (the level that
    counts as "at target", which a policy planning spare nodes exceeds). ``progress(done,
    ticks)`` is called after each simulated day and at the end."""
    clock = _Clock(
        policy,
        spec,
        replay,
        interval_ticks=interval_ticks,
        cold_ticks=cold_ticks,
        seed=seed,
        target=float(spec.capacity.gpus) if target is None else target,
        keep_series=keep_series,
    )
    for t in range(replay.ticks):
        clock.tick(t)
        if progress is not None and ((t + 1) % max(1, 86400 // replay.tick_seconds) == 0 or t + 1 == replay.ticks):
            progress(t + 1, replay.ticks)
    return clock.outcome()


@dataclass
class _Tally:
    """The running totals of one replay (see :class:`Outcome` for each figure)."""

    cost: float = 0.0
    work_lost: float = 0.0
    od_hours: float = 0.0
    spot_hours: float = 0.0
    max_spend: float = 0.0
    launches: int = 0
    failed: int = 0
    interruptions: int = 0
    at_target: int = 0
    at_critical: int = 0
    measured: int = 0
    hours: dict[str, float] = field(default_factory=dict)  # pool -> node-hours run there
    lost_in: dict[str, int] = field(default_factory=dict)  # pool -> nodes the market took back
    ready_s: list[float] = field(default_factory=list)
    cost_s: list[float] = field(default_factory=list)
    od_s: list[float] = field(default_factory=list)
    spot_s: list[float] = field(default_factory=list)


class _Clock:
    """One replay: the fleet's nodes and the market, one method per phase of a tick (the module
    doc's model, in its order: the market takes back, make-before-break terminations settle,
    the policy's pass, accounting)."""

    def __init__(
        self,
        policy: Policy,
        spec: FleetSpec,
        replay: Replay,
        *,
        interval_ticks: int,
        cold_ticks: int,
        seed: int,
        target: float,
        keep_series: bool,
    ):
        self.policy, self.spec, self.replay = policy, spec, replay
        self.interval_ticks, self.cold_ticks, self.keep_series = interval_ticks, cold_ticks, keep_series
        self.rng = random.Random(seed)
        self.gap = replay.tick_seconds
        self.target = target
        self.critical = max(spec.critical_gpus, 0.0)
        self.memory = spec.rebalance.backoff_memory_seconds
        self.alive: dict[str, _Node] = {}
        self.waiting: list[tuple[str, tuple[str, ...]]] = []  # (node to terminate, nodes that must be ready first)
        self.events: list[PoolEvent] = []
        self.seq = 0
        self.tally = _Tally()

    def tick(self, t: int) -> None:
        self.take_back(t)
        self.settle_terminations(t)
        if t % self.interval_ticks == 0:
            self.policy_pass(t)
        self.account(t)

    # 1. the market takes back what its pools no longer hold
    def take_back(self, t: int) -> None:
        by_pool: dict[str, list[_Node]] = {}
        for node in self.alive.values():
            by_pool.setdefault(node.offer.pool.id, []).append(node)
        for pool, nodes in sorted(by_pool.items()):
            cap = self.replay.cap(pool, t)
            if cap is None or len(nodes) <= cap:
                continue
            victims = nodes if cap == 0 else self.rng.sample(sorted(nodes, key=lambda n: n.id), len(nodes) - cap)
            for node in victims:
                self._lose(node, pool, t)
            self.events.append(PoolEvent(pool, "interrupted", t * self.gap))

    def _lose(self, node: _Node, pool: str, t: int) -> None:
        del self.alive[node.id]
        self.tally.interruptions += 1
        self.tally.lost_in[pool] = self.tally.lost_in.get(pool, 0) + 1
        if t >= node.ready_tick and node.checkpoint_seconds:
            self.tally.work_lost += node.weight * (((t - node.ready_tick) * self.gap) % node.checkpoint_seconds) / 3600

    # 2. make-before-break terminations whose replacements are ready (or lost)
    def settle_terminations(self, t: int) -> None:
        still = []
        ready_now = {n.id for n in self.alive.values() if n.ready_tick <= t}
        for victim, needs in self.waiting:
            verdict = may_break(needs, self.alive, ready_now) if victim in self.alive else None
            if verdict:
                del self.alive[victim]
            elif verdict is not None:
                still.append((victim, needs))
        self.waiting = still

    # 3. the policy's pass: asked again within the pass while a launch finds no capacity
    def policy_pass(self, t: int) -> None:
        now = t * self.gap
        self.events = [e for e in self.events if e.at >= now - self.memory]
        for _ in range(MAX_ROUNDS):
            actions = self.policy.act(self.view(t))
            new_by_pool, short = self.launch(actions, t)
            self.terminate(actions, new_by_pool)
            if not short:
                break

    def view(self, t: int) -> View:
        alive = self.alive.values()
        return View(
            now=t * self.gap,
            instances=tuple(_observed(n, self.gap, t) for n in alive),
            events=tuple(self.events),
            exposure=_exposure(self.tally.hours, self.tally.lost_in),
            pending=frozenset(v for v, _ in self.waiting),
            ready=frozenset(n.id for n in alive if n.ready_tick <= t),
        )

    def launch(self, actions: Sequence[Action], t: int) -> tuple[dict[str, list[str]], bool]:
        """The pass's launches, within what each pool holds; the new node ids per pool and
        whether one found no capacity (a ``no-capacity`` event)."""
        new_by_pool: dict[str, list[str]] = {}
        short = False
        for a in actions:
            if not isinstance(a, Launch):
                continue
            pool = a.offer.pool.id
            cap = self.replay.cap(pool, t)
            running = sum(1 for n in self.alive.values() if n.offer.pool.id == pool)
            room = a.count if cap is None else max(0, min(a.count, cap - running))
            for _k in range(room):
                self.seq += 1
                node = _Node(
                    f"n{self.seq}",
                    a.offer,
                    self.spec.weight(a.offer.accelerator) * a.offer.gpus,
                    t,
                    t + self.cold_ticks,
                    _checkpoint(a.offer, self.spec),
                )
                self.alive[node.id] = node
                new_by_pool.setdefault(pool, []).append(node.id)
            self.tally.launches += room
            if room < a.count:
                self.tally.failed += a.count - room
                short = True
                self.events.append(PoolEvent(pool, "no-capacity", t * self.gap))
        return new_by_pool, short

    def terminate(self, actions: Sequence[Action], new_by_pool: Mapping[str, list[str]]) -> None:
        """At once, or (``after``) once this pass's launches in those pools are ready."""
        for a in actions:
            if isinstance(a, Terminate) and a.instance_id in self.alive:
                needs = tuple(i for p in a.after for i in new_by_pool.get(p, ()))
                if not a.after:
                    del self.alive[a.instance_id]
                elif needs and all(p in new_by_pool for p in a.after):
                    self.waiting.append((a.instance_id, needs))

    # 4. accounting for tick t
    def account(self, t: int) -> None:
        tally, gap = self.tally, self.gap
        spend = sum(n.offer.price_per_hour for n in self.alive.values())
        tally.max_spend = max(tally.max_spend, spend)
        tally.cost += spend * gap / 3600
        ready = sum(n.weight for n in self.alive.values() if n.ready_tick <= t)
        od_w = spot_w = 0.0
        for n in self.alive.values():
            pool = n.offer.pool.id
            tally.hours[pool] = tally.hours.get(pool, 0.0) + gap / 3600
            if n.offer.market is Market.ON_DEMAND:
                tally.od_hours += gap / 3600
                od_w += n.weight
            else:
                tally.spot_hours += gap / 3600
                spot_w += n.weight
        if t >= self.cold_ticks:
            tally.measured += 1
            tally.at_target += ready >= self.target - EPS
            tally.at_critical += ready >= self.critical - EPS
        if self.keep_series:
            tally.ready_s.append(ready)
            tally.cost_s.append(tally.cost)
            tally.od_s.append(od_w)
            tally.spot_s.append(spot_w)

    def outcome(self) -> Outcome:
        tally = self.tally
        rates = {o.pool.id: o.interruptions_per_hour for o in self.replay.offers}
        pools = {
            p: PoolFigures(h, tally.lost_in.get(p, 0), rates.get(p, 0.0) * h)
            for p, h in sorted(tally.hours.items())
            if p in self.replay.capacity
        }
        measured = tally.measured
        return Outcome(
            policy=self.policy.name,
            at_target=tally.at_target / measured if measured else 0.0,
            at_critical=tally.at_critical / measured if measured else 0.0,
            cost=tally.cost,
            interruptions=tally.interruptions,
            work_lost_gpu_hours=tally.work_lost,
            on_demand_node_hours=tally.od_hours,
            spot_node_hours=tally.spot_hours,
            launches=tally.launches,
            failed_launches=tally.failed,
            max_spend_per_hour=tally.max_spend,
            pools=pools,
            ready_series=tuple(tally.ready_s),
            cost_series=tuple(tally.cost_s),
            on_demand_series=tuple(tally.od_s),
            spot_series=tuple(tally.spot_s),
        )


def _observed(node: _Node, gap: int, tick: int) -> ObservedInstance:
    o = node.offer
    return ObservedInstance(
        id=node.id,
        pool=o.pool.id,
        market=o.market,
        accelerator=o.accelerator,
        gpus=o.gpus,
        price_per_hour=o.price_per_hour,
        launched_at=float(node.launched * gap),
        starting=tick < node.ready_tick,
    )


def _exposure(hours: Mapping[str, float], lost: Mapping[str, int]) -> dict[str, Exposure]:
    return {p: Exposure(h, lost.get(p, 0)) for p, h in hours.items()}


def _checkpoint(offer: Offer, spec: FleetSpec) -> float | None:
    if offer.market is Market.ON_DEMAND:
        return None
    return economics.checkpoint_interval(offer.interruptions_per_hour, spec.workload)
