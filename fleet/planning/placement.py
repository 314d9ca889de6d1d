"""Placement: every node of the fleet inside one zone, region or provider, the best one exactly.

A synchronous (coupled) job cannot span slow links, so the spec's ``placement`` level
(``FleetSpec.placement_level``) says which failure domain all its nodes must share. The
plans allowed are then the union over the domains ``D`` of that level of the plans using
only ``D``'s pools, so the best plan is the best of the per-domain optima: one small
problem per domain, which is also what makes placed plans fast.

**Exact without solving every domain.** ``fleet.planning.domain_bounds`` gives, per domain, a
value no plan in it can beat. Domains are solved in increasing bound order, each only for
plans worth less than the runner-up so far (the coupled walk starts from that value), and the
search stops once a bound exceeds the runner-up's value: no later domain can beat the winner
or the runner-up, so both are exact. A domain is solved once its refined bound is the least
left. The other strategies rank by a pair (interruptions or the largest spot pool, then
price) and solve every domain. Ties go to the domain whose name sorts first.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fleet.planning import economics
from fleet.planning.candidates import Candidates
from fleet.planning.domain_bounds import Bounds
from fleet.planning.relaxation import NO_QUOTAS, QuotaRows, Spread
from fleet.spec import FleetSpec, Strategy, WorkloadKind

#: Provider features that keep a zone-level coupled job on a low-latency interconnect.
INTERCONNECT = {
    "aws": "AWS cluster placement group (strategy cluster)",
    "gcp": "GCP compact placement policy",
    "azure": "Azure proximity placement group",
}
METRIC = {
    Strategy.PRICE_CAPACITY_OPTIMIZED: "true cost $/h",
    Strategy.LOWEST_PRICE: "$/h",
    Strategy.CAPACITY_OPTIMIZED: "interruptions/h",
    Strategy.DIVERSIFIED: "largest spot pool (weighted GPUs)",
}
_REL = 1e-9


@dataclass
class Solved:
    """One domain's (or the whole catalog's) plan: the pools it was solved over, counts per
    pool (a partial plan when ``shortfall``), the strategy's value (a tuple, smaller is
    better; ``None`` when the cutoff ruled it out), notes and extra exclusions."""

    cand: Candidates
    counts: np.ndarray
    shortfall: str
    notes: list[str]
    exclusions: list
    value: tuple[float, ...] | None


@dataclass
class Choice:
    solved: Solved
    level: str
    domain: str
    domains: int
    tried: int
    runner_up: str = ""
    runner_up_value: tuple[float, ...] | None = None
    outside: int = 0  # allowed pools outside the chosen domain


def value_of(
    spec: FleetSpec, cand: Candidates, counts: np.ndarray, churn: float, independent_cost: np.ndarray
) -> tuple[float, ...]:
    """The strategy's objective of ``counts`` as a tuple (smaller is better), with a re-plan's
    launch penalty ``churn`` on new launches."""
    new = np.maximum(counts - cand.current, 0)
    price = float(cand.price @ counts) + churn * float(cand.price @ new)
    strategy = spec.strategy
    if strategy is Strategy.LOWEST_PRICE:
        return (price,)
    if strategy is Strategy.PRICE_CAPACITY_OPTIMIZED:
        if spec.workload.kind is WorkloadKind.COUPLED:
            return (price * economics.overhead_factor(float(cand.rate @ counts), spec.workload),)
        return (float(independent_cost @ counts) + churn * float(independent_cost @ new),)
    if strategy is Strategy.CAPACITY_OPTIMIZED:
        return (round(float(cand.rate @ counts), 9), price)
    spot_load = cand.weighted * counts * cand.spot
    return (round(float(spot_load.max(initial=0.0)), 9), price)


def domains_of(cand: Candidates, level: str) -> tuple[list[np.ndarray], list[str]]:
    """The pools of each domain of ``level`` present in ``cand`` (ascending indices) and the
    domains' names (``provider``, ``provider/region``, ``provider/region/zone``)."""
    labels = cand.labels()
    codes, names = labels.codes(level), labels.names(level)
    order = np.argsort(codes, kind="stable")
    present, starts = np.unique(codes[order], return_index=True)
    members = np.split(order, starts[1:])
    return members, [str(names[c]) for c in present]


def choose(
    spec: FleetSpec,
    cand: Candidates,
    level: str,
    solve: Callable[[Candidates, tuple[float, ...] | None, bool], Solved],
    quotas: QuotaRows = NO_QUOTAS,
    spread: Spread | None = None,
) -> Choice:
    """The best domain of ``level`` and the runner-up, exactly (module docstring).

    ``solve(sub, cutoff, partial)`` plans over the pools ``sub`` of one domain and may return a
    value of ``None`` when no plan there is worth less than ``cutoff`` or, without ``partial``,
    none meets the spec. When no domain can meet the spec, the partial plan of the domain that
    can hold the most weighted GPUs is returned. ``quotas`` and ``spread`` tighten the bounds."""
    members, names = domains_of(cand, level)
    bounds = Bounds(spec, cand, members, quotas, spread)
    queue = [(float(bounds.first[d]), names[d], d, False) for d in range(len(members))]
    heapq.heapify(queue)
    top: list[tuple[tuple[float, ...], str, int, Solved]] = []
    tried = 0
    while queue:
        bound, _, d, refined = heapq.heappop(queue)
        if not np.isfinite(bound) and bound > 0:
            break  # this and every later domain cannot cover
        if len(top) == 2 and bound > top[1][0][0] * (1 + _REL) + _REL:
            break
        if not refined and bounds.coupled:  # the tighter bound, only where the search reaches
            enough = top[1][0][0] * (1 + _REL) + _REL if len(top) == 2 else np.inf
            heapq.heappush(queue, (max(bounds.refine(d, enough), bound), names[d], d, True))
            continue
        tried += 1
        cutoff = top[1][0] if len(top) == 2 else None
        sol = solve(cand.subset(members[d]), cutoff, False)
        if sol.shortfall or sol.value is None:
            continue
        top = sorted(top + [(sol.value, names[d], d, sol)], key=lambda t: (t[0], t[1]))[:2]
    if not top:
        d = _roomiest(spec, cand, members, names)
        sol = solve(cand.subset(members[d]), None, True)
        sol.shortfall = (
            f"no single {level} can meet the spec (placement {level}); in the {level} that holds "
            f"the most, {names[d]}: {sol.shortfall}"
        )
        return Choice(sol, level, names[d], len(members), tried, outside=len(cand) - len(members[d]))
    _, name, d, sol = top[0]
    runner = top[1] if len(top) > 1 else None
    return Choice(
        sol,
        level,
        name,
        len(members),
        tried,
        runner_up=runner[1] if runner else "",
        runner_up_value=runner[0] if runner else None,
        outside=len(cand) - len(members[d]),
    )


def _roomiest(spec: FleetSpec, cand: Candidates, members: list[np.ndarray], names: list[str]) -> int:
    """The domain whose pools can hold the most weighted GPUs (up to the target), first by name."""
    target = float(spec.capacity.gpus)
    held = [
        min(float(np.sum(cand.weighted[m] * np.minimum(cand.upper[m], target / cand.weighted[m] + 1))), target)
        for m in members
    ]
    return min(range(len(members)), key=lambda d: (-held[d], names[d]))
