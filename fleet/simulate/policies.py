"""The policies a simulation compares (each an ``engine.Policy``).

* ``Rebalancer``: the spec's own policy, ``fleet.rebalance.decide`` (the planner included),
  exactly as ``fleet rebalance`` runs it; ``spare`` plans that many extra weighted GPUs.
* ``AllOnDemand``: the target on the cheapest on-demand pool.
* ``SinglePool``: the cheapest spot pool, on-demand while it has no capacity, back to spot
  (make before break) when it has.
* ``CheapestFirst``: spot only; a missing node goes to the cheapest spot pool that did not
  just refuse (what SkyPilot and dstack do).
* ``EvenSpread``: spot only; nodes spread evenly over every spot pool, a missing node going
  to the pool with the fewest that did not just refuse.
* ``GreedyBridge``: cheapest-first spot, and on-demand covers any shortfall of ready spot at
  once, released as soon as the spot nodes are ready (SkyPilot managed jobs, SkyServe's dynamic
  fallback).
* ``SpotHedge``: SpotHedge's placer (SkyServe): each missing node goes to the cheapest ACTIVE
  pool the fleet does not use yet (the cheapest ACTIVE one when it uses them all); a pool that
  interrupts or refuses is marked PREEMPTED, and the marks are reset when fewer than 2 pools
  stay ACTIVE. On-demand covers what spot cannot take, returned to spot (make before break)
  when it can.

"Cheapest" is per weighted GPU, ties broken by pool id. Baselines learn availability only by
trying (a refused launch is a ``no-capacity`` event of this pass), as the rebalancer does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fleet.model import Market, Offer
from fleet.rebalance import decide
from fleet.rebalance.types import Action, Launch, PolicyState, Terminate
from fleet.simulate.engine import View
from fleet.spec import FleetSpec


def with_spare(spec: FleetSpec, spare: int) -> FleetSpec:
    """``spec`` planning ``spare`` more weighted GPUs (its critical level unchanged)."""
    if not spare:
        return spec
    return spec.model_copy(update={"capacity": spec.capacity.model_copy(update={"gpus": spec.capacity.gpus + spare})})


@dataclass
class Rebalancer:
    spec: FleetSpec
    offers: Sequence[Offer]
    name: str = "ours"
    state: PolicyState = field(default_factory=PolicyState)

    def act(self, view: View) -> Sequence[Action]:
        decision = decide(
            self.spec, self.offers, view.instances, view.events, view.now, self.state, exposure=view.exposure
        )
        self.state = decision.state
        # a return to spot already under way is not started twice (its replacements are starting)
        again = any(isinstance(a, Terminate) and a.instance_id in view.pending for a in decision.actions)
        return [
            a
            for a in decision.actions
            if not (again and (isinstance(a, Terminate) or getattr(a, "reason", "") == "return-to-spot"))
        ]


class _Baseline:
    name = "baseline"

    def __init__(self, spec: FleetSpec, offers: Sequence[Offer]):
        self.spec = spec
        self.target = float(spec.capacity.gpus)
        ranked = sorted(offers, key=lambda o: (o.price_per_hour / self.weight(o), o.pool.id))
        self.spot = [o for o in ranked if o.market is Market.SPOT and self.weight(o) > 0]
        self.on_demand = [o for o in ranked if o.market is Market.ON_DEMAND and self.weight(o) > 0]

    def weight(self, o: Offer) -> float:
        return self.spec.weight(o.accelerator) * o.gpus or 1e-12

    def missing(self, view: View) -> float:
        have = sum(self.spec.weight(i.accelerator) * i.gpus for i in view.instances if i.id not in view.pending)
        return self.target - have

    @staticmethod
    def refused(view: View) -> set[str]:
        return {e.pool for e in view.events if e.kind == "no-capacity" and e.at == view.now}

    def fill(self, offer: Offer, missing: float) -> list[Action]:
        n = int(-(-missing // self.weight(offer))) if missing > 1e-9 else 0
        return [Launch(offer, n, "replace-lost")] if n else []


class AllOnDemand(_Baseline):
    name = "all on-demand"

    def act(self, view: View) -> Sequence[Action]:
        return self.fill(self.on_demand[0], self.missing(view)) if self.on_demand else []


class SinglePool(_Baseline):
    name = "single pool + on-demand"

    def act(self, view: View) -> Sequence[Action]:
        if not self.spot:
            return []
        pool = self.spot[0]
        refused = pool.pool.id in self.refused(view)
        missing = self.missing(view)
        if missing > 1e-9:
            if refused:
                return self.fill(self.on_demand[0], missing) if self.on_demand else []
            return self.fill(pool, missing)
        od = [i for i in view.instances if i.market is Market.ON_DEMAND and i.id not in view.pending]
        if refused or not od:
            return []
        return [
            Launch(pool, len(od), "return-to-spot"),
            *(Terminate(i.id, i.pool, "return-to-spot", after=(pool.pool.id,)) for i in od),
        ]


class CheapestFirst(_Baseline):
    name = "cheapest-first spot"

    def act(self, view: View) -> Sequence[Action]:
        refused = self.refused(view)
        for o in self.spot:
            if o.pool.id not in refused:
                return self.fill(o, self.missing(view))
        return []


class EvenSpread(_Baseline):
    name = "even spread"

    def act(self, view: View) -> Sequence[Action]:
        missing = self.missing(view)
        refused = self.refused(view)
        open_ = [o for o in self.spot if o.pool.id not in refused]
        if missing <= 1e-9 or not open_:
            return []
        count = {o.pool.id: 0 for o in open_}
        for i in view.instances:
            if i.pool in count:
                count[i.pool] += 1
        adds: dict[str, int] = {}
        by_id = {o.pool.id: o for o in open_}
        while missing > 1e-9:
            pool = min(count, key=lambda p: (count[p], p))
            count[pool] += 1
            adds[pool] = adds.get(pool, 0) + 1
            missing -= self.weight(by_id[pool])
        return [Launch(by_id[p], n, "replace-lost") for p, n in sorted(adds.items())]


class GreedyBridge(_Baseline):
    name = "greedy + on-demand bridge"

    def act(self, view: View) -> Sequence[Action]:
        mine = [i for i in view.instances if i.id not in view.pending]
        spot = [i for i in mine if i.market is Market.SPOT]
        od = [i for i in mine if i.market is Market.ON_DEMAND]
        w = lambda i: self.spec.weight(i.accelerator) * i.gpus  # noqa: E731
        out: list[Action] = []
        refused = self.refused(view)
        pool = next((o for o in self.spot if o.pool.id not in refused), None)
        missing = self.target - sum(w(i) for i in spot)
        if pool is not None:
            out += self.fill(pool, missing)
        if not self.on_demand:
            return out
        # the bridge: on-demand for what ready spot does not cover; released once it does
        uncovered = self.target - sum(w(i) for i in spot if i.id in view.ready)
        surplus = sum(w(i) for i in od) - max(uncovered, 0.0)
        if surplus < -1e-9:
            out += self.fill(self.on_demand[0], -surplus)
        for i in sorted(od, key=lambda i: (i.id not in view.ready, -i.launched_at, i.id)):
            if w(i) <= surplus + 1e-9:
                out.append(Terminate(i.id, i.pool, "return-to-spot"))
                surplus -= w(i)
        return out


class SpotHedge(_Baseline):
    name = "SpotHedge placer"

    def __init__(self, spec: FleetSpec, offers: Sequence[Offer]):
        super().__init__(spec, offers)
        self.preempted: set[str] = set()
        self.seen: set[tuple[str, str, float]] = set()

    def _active(self, view: View) -> list[Offer]:
        for e in view.events:
            if (e.pool, e.kind, e.at) not in self.seen:
                self.seen.add((e.pool, e.kind, e.at))
                self.preempted.add(e.pool)
        active = [o for o in self.spot if o.pool.id not in self.preempted]
        if len(active) < 2:
            self.preempted.clear()
            active = [o for o in self.spot if o.pool.id not in self.refused(view)]
        return active

    def _place(self, active: list[Offer], used: set[str], missing: float) -> dict[str, int]:
        adds: dict[str, int] = {}
        while missing > 1e-9 and active:
            o = next((o for o in active if o.pool.id not in used), active[0])
            used.add(o.pool.id)
            adds[o.pool.id] = adds.get(o.pool.id, 0) + 1
            missing -= self.weight(o)
        return adds

    def act(self, view: View) -> Sequence[Action]:
        active = self._active(view)
        by_id = {o.pool.id: o for o in self.spot}
        mine = [i for i in view.instances if i.id not in view.pending]
        used = {i.pool for i in mine}
        missing = self.missing(view)
        if missing > 1e-9:
            if active:
                adds = self._place(active, used, missing)
                return [Launch(by_id[p], n, "replace-lost") for p, n in sorted(adds.items())]
            return self.fill(self.on_demand[0], missing) if self.on_demand else []
        od = [i for i in mine if i.market is Market.ON_DEMAND]
        if not od or not active:
            return []
        adds = self._place(active, used, sum(self.spec.weight(i.accelerator) * i.gpus for i in od))
        return [
            *(Launch(by_id[p], n, "return-to-spot") for p, n in sorted(adds.items())),
            *(Terminate(i.id, i.pool, "return-to-spot", after=tuple(sorted(adds))) for i in od),
        ]


BASELINES = (AllOnDemand, SinglePool, CheapestFirst, EvenSpread, GreedyBridge, SpotHedge)
