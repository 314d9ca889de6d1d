"""Exact plan for a coupled job: minimise ``P' * F(Lam)`` over integer instance counts.

For a coupled job one interruption anywhere stalls every node, so the fleet's expected true
cost per hour is ``P * F(Lam)`` (``fleet.planning.economics``): ``P`` its price, ``Lam`` its
interruption rate, ``F`` increasing with ``F(0) = 1``. In a re-plan ``P' = P + (what new
launches are charged, ``Model.launch_costs``)``, else ``P' = P``. Both are linear in the counts, so we walk the
(P', Lam) Pareto frontier from the cheap end with MILPs ``min P' s.t. Lam <= hi``:

Invariant: every plan better than the best found so far has ``Lam <= hi``. Let ``x``
solve ``min P' s.t. Lam <= hi``; a better plan ``z`` has ``P'(z) >= P'(x)``, so (a)
``Lam(z) < Lam(x)``, else ``z`` is no better than ``x``, and (b) ``F(Lam(z)) < best /
P'(x)``, i.e. ``Lam(z) < F^-1(best / P'(x))``. Hence the next ``hi`` is the smaller of
the two. The walk ends when ``hi < 0`` or no plan with ``Lam <= hi`` has ``P'`` below the
best value (``F >= 1``, so none could beat it); the best plan seen is then optimal (plans
whose rates differ by less than ``_EPS`` per hour count as equal).

Each step's MILP also carries ``cut_row``, a linear row every plan better than the best
meets (the minimum over those plans is what the invariant needs), so a step that can find
nothing better is infeasible. Before each MILP, LP relaxations over bands of ``Lam``
(``_screen``, with each band's own cut row) lower ``hi`` past bands that cannot hold a
better plan. Incumbents make the cuts bite early: the plan running
now, the independent-nodes plan, and the plans of a successive linearisation
(``_tangent_plans``: the MILP on the tangent plane of ``P * F(Lam)``,
``economics.coupled_tangent``, re-taken at each plan). ``MAX_STEPS`` bounds the work;
when it is hit the best plan is returned with a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fleet.planning import economics
from fleet.planning.milp import Extra, Model, Row, Solution
from fleet.spec import Workload

GAP = 1e-9
MAX_STEPS = 100
SCREEN_BANDS = 8
TANGENT_ROUNDS = 6
CUT_POINTS = 256  # grid intervals for cut_row
_EPS = 1e-4  # interruption rates closer than this (per hour) count as equal


@dataclass
class CoupledResult:
    counts: np.ndarray | None
    notes: list[str] = field(default_factory=list)


def solve(
    model: Model, workload: Workload, churn: float, independent_cost: np.ndarray, beat: float | None = None
) -> CoupledResult:
    """The plan of least ``P' * F(Lam)``; ``counts`` is ``None`` if the model is infeasible or,
    with ``beat`` (a value found elsewhere, e.g. in another placement domain), if no plan is
    worth less than ``beat``: then the walk starts from ``beat`` as its best value, which only
    strengthens its cuts, and skips the successive linearisation."""
    cand = model.cand
    penalty = model.launch_costs(cand.price, churn)

    factor = _Factor(workload)

    def linear(counts: np.ndarray) -> float:
        new = np.maximum(counts - cand.current, 0)
        return float(cand.price @ counts) + (float(penalty @ new) if penalty is not None else 0.0)

    def value(counts: np.ndarray) -> float:
        return linear(counts) * factor(float(cand.rate @ counts))

    root = model.solve(cand.price, penalty=penalty, cutoff=np.inf if beat is None else beat)
    if root is None:
        return CoupledResult(None)
    notes: list[str] = []
    seeds = [cand.current.copy()] if churn and model.feasible(cand.current) else []
    seeds.append(root.counts)
    if beat is None:
        start = model.solve(independent_cost)
        if start is not None:
            seeds += _tangent_plans(model, workload, churn, start.counts)
    best, best_value = None, np.inf if beat is None else beat
    for counts in seeds:  # the first of equals wins: the running fleet
        if best is None and beat is None or value(counts) < best_value * (1 - GAP):
            best, best_value = counts, value(counts)

    x = root
    for _ in range(MAX_STEPS):
        p = linear(x.counts)
        hi = min(float(cand.rate @ x.counts) - _EPS, _inverse_factor(best_value / p, workload) if p > 0 else -1.0)
        if hi >= 0:
            hi = _screen(model, penalty, hi, best_value * (1 - GAP), factor)
        if hi < 0:
            break
        below = _cheapest_below(model, penalty, hi, cutoff=best_value * (1 - GAP), factor=factor)  # value >= P'
        if below is None:
            break
        x = below
        if value(x.counts) < best_value * (1 - GAP):
            best, best_value = x.counts, value(x.counts)
    else:
        notes.append(f"coupled search stopped after {MAX_STEPS} steps; the plan may not be optimal")
    return CoupledResult(best, notes)


class _Factor:
    """``F`` of the workload: called on one rate, ``many`` on an array (negative rates as 0)."""

    def __init__(self, workload: Workload):
        self.workload = workload

    def __call__(self, rate: float) -> float:
        return economics.overhead_factor(max(rate, 0.0), self.workload)

    def many(self, rates: np.ndarray) -> np.ndarray:
        return economics.overhead_factors(np.maximum(rates, 0.0), self.workload)


def _screen(model: Model, penalty: np.ndarray | None, hi: float, beat: float, factor) -> float:
    """Lower ``hi`` past rate bands that cannot hold a plan worth less than ``beat``.

    ``[0, hi]`` is cut into ``SCREEN_BANDS`` bands; in band ``[a, b]`` every plan is worth at
    least ``LP(min P' s.t. a <= Lam <= b) * F(a)``, and only plans that meet the band's
    ``cut_row`` may be worth less than ``beat``, so the LP carries it too (an infeasible LP
    rules the band out). Returns the top of the highest band that
    may still hold a better plan, or -1 when none can.
    """
    cand = model.cand
    edges = np.linspace(0.0, hi, SCREEN_BANDS + 1)
    pools = np.arange(model.n)
    for a, b in reversed(list(zip(edges[:-1], edges[1:]))):
        slope, bound = cut_row(b, beat, factor, lo=a, factors=factor.many)
        band = Extra(rows=[Row(pools, cand.rate, lb=a, ub=b), Row(pools, cand.price + slope * cand.rate, ub=bound)])
        if model.lower_bound(cand.price, penalty, band) * factor(a) < beat:
            return float(b)
    return -1.0


def _tangent_plans(model: Model, workload: Workload, churn: float, first: np.ndarray) -> list[np.ndarray]:
    """Successive linearisation: solve the tangent plane of ``P * F(Lam)`` at a plan, move to
    the plan found, repeat until a plan repeats (at most ``TANGENT_ROUNDS``). Every plan seen
    is a good incumbent; alone this is a heuristic (supported Pareto points only)."""
    cand = model.cand
    floor = float(cand.rate[cand.rate > 0].min(initial=1.0))
    plans, seen = [first], {first.tobytes()}
    for _ in range(TANGENT_ROUNDS):
        ref = plans[-1]
        tangent = economics.coupled_tangent(float(cand.price @ ref), max(float(cand.rate @ ref), floor), workload)
        cost = tangent.price_coef * cand.price + tangent.rate_coef * cand.rate
        sol = model.solve(cost, penalty=model.launch_costs(cost, churn))
        if sol is None or sol.counts.tobytes() in seen:
            break
        seen.add(sol.counts.tobytes())
        plans.append(sol.counts)
    return plans


def _inverse_factor(target: float, workload: Workload) -> float:
    """Largest rate whose overhead factor stays below ``target`` (bisection; F increases)."""
    if target <= 1.0:
        return -1.0
    lo, hi = 0.0, 1.0
    while economics.overhead_factor(hi, workload) < target and hi < 1e9:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if economics.overhead_factor(mid, workload) < target else (lo, mid)
    return hi


def cut_row(hi: float, beat: float, factor, lo: float = 0.0, factors=None) -> tuple[float, float]:
    """``(s, c)`` with ``s >= 0`` such that every plan with ``lo <= Lam <= hi`` worth less
    than ``beat`` has ``P + s * Lam < c`` (``P`` its price without launch penalty).

    Such a plan has ``P <= P' < beat / F(Lam)``. On the grid ``l_k = lo + k * (hi - lo) / K``
    and ``Lam`` in ``[l_k, l_k+1]``, F increasing gives ``P + s * Lam < beat / F(l_k) + s *
    l_k+1``, so ``c`` is the largest of those (only F increasing is used); ``s`` is the chord
    slope of ``beat / F`` over ``[lo, hi]``, which makes the row bite near ``Lam = hi``.
    ``factors``, when given, is ``F`` over an array of rates (faster than ``factor`` per point).
    """
    if hi <= lo or beat <= 0:
        return 0.0, beat
    grid = np.linspace(lo, hi, CUT_POINTS + 1)
    g = beat / (factors(grid) if factors is not None else np.array([factor(float(x)) for x in grid]))
    if not np.isfinite(g).all():
        return 0.0, beat  # P <= P' < beat: always valid
    slope = max((g[0] - g[-1]) / (hi - lo), 0.0)
    return slope, float(np.max(g[:-1] + slope * grid[1:])) * (1 + 1e-9)


def _cheapest_below(model: Model, penalty: np.ndarray | None, hi: float, cutoff: float, factor) -> Solution | None:
    """Cheapest plan (``P'``) whose interruption rate is at most ``hi`` among those that may be
    worth less than ``cutoff`` (``cut_row``); ``None`` when there is none."""
    cand = model.cand
    pools = np.arange(model.n)
    slope, bound = cut_row(hi, cutoff, factor, factors=factor.many)
    rows = [Row(pools, cand.rate, ub=hi), Row(pools, cand.price + slope * cand.rate, ub=bound)]
    return model.solve(cand.price, penalty=penalty, extra=Extra(rows=rows), cutoff=cutoff)
