"""The four allocation strategies as objectives over ``fleet.planning.milp.Model``.

* ``price-capacity-optimized`` (default): minimise the expected true cost per hour, the
  price inflated by interruption overhead under the workload model
  (``fleet.planning.economics``). Independent nodes: the cost is linear, one MILP. Coupled job:
  the cost ``P * F(Lam)`` is not linear; ``fleet.planning.coupled`` solves it exactly by a walk
  along the (price, interruption rate) Pareto frontier.
* ``lowest-price``: minimise $/h, interruptions ignored.
* ``capacity-optimized``: minimise the fleet's expected interruptions per hour
  ``sum(n_i * lam_i)``, then $/h among those plans. On-demand never interrupts, so the
  market split is fixed first: on-demand weighted GPUs may not exceed what the
  price-capacity-optimized plan uses (or the baseline); within that, spot goes to the
  pools (and node sizes) least likely to be interrupted.
* ``diversified``: with the same market split, minimise the largest spot pool's weighted
  GPUs, then $/h among those plans. Spot capacity is thus spread over as many pools, in
  units as small, as the rules (node sizes, caps, min_pools, budget) allow.

Every strategy charges a re-plan's new launches (``Model.launch_costs``): ``launch_penalty()`` of
their hourly cost (a restart amortised over ``PLAN_HORIZON_HOURS``) plus, per weighted GPU
launched, the dearest hourly cost per weighted GPU among the candidates. So replacing a
running instance by launches of the same GPUs never pays: a rerun keeps what runs (wherever
the rules still allow it, the rebalancer's replacements included) and launches only the gap.
Deterministic: same inputs, same plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fleet.planning import coupled, economics
from fleet.planning.candidates import Candidates
from fleet.planning.milp import TOL, Extra, Model, Row, Solution
from fleet.spec import Strategy, Workload, WorkloadKind

#: Hours a plan is expected to stay in force; a new launch's restart is spread over them.
PLAN_HORIZON_HOURS = 24.0


def launch_penalty(workload: Workload) -> float:
    """Share of a node's hourly cost charged per new launch in a re-plan."""
    return max(workload.restart_seconds, 60.0) / 3600 / PLAN_HORIZON_HOURS


@dataclass
class Outcome:
    counts: np.ndarray | None  # None: the spec is infeasible
    notes: list[str] = field(default_factory=list)


def independent_costs(cand: Candidates, workload: Workload) -> np.ndarray:
    """``p_i * F(lam_i)`` per pool (F computed once per distinct rate): what a node of each pool
    costs an independent workload, its interruptions' overhead included."""
    rates, inverse = np.unique(cand.rate, return_inverse=True)
    factors = np.array([economics.overhead_factor(float(r), workload) for r in rates])
    return cand.price * factors[inverse.reshape(-1)]


def solve(strategy: Strategy, model: Model, workload: Workload, replan: bool, cutoff: float | None = None) -> Outcome:
    """Runs ``strategy``; ``replan`` charges new launches (the model's candidates carry
    ``current``). ``cutoff`` (price-capacity-optimized and lowest-price only): a plan must be
    worth less, else ``counts`` is ``None`` as for an infeasible model."""
    churn = launch_penalty(workload) if replan else 0.0
    if strategy is Strategy.LOWEST_PRICE:
        return _single(model, model.cand.price, churn, cutoff=cutoff)
    if strategy is Strategy.PRICE_CAPACITY_OPTIMIZED:
        return _price_capacity(model, workload, churn, cutoff)
    split = _price_capacity(model, workload, 0.0)
    if split.counts is None:
        return split
    od_cap = max(float(model.cand.weighted[~model.cand.spot] @ split.counts[~model.cand.spot]), model.baseline)
    stage = _least_interruptions if strategy is Strategy.CAPACITY_OPTIMIZED else _least_max_pool
    return stage(model, od_cap, churn)


def _single(
    model: Model, cost: np.ndarray, churn: float, extra: Extra | None = None, cutoff: float | None = None
) -> Outcome:
    sol = model.solve(
        cost, penalty=model.launch_costs(cost, churn), extra=extra, cutoff=np.inf if cutoff is None else cutoff
    )
    return Outcome(None if sol is None else sol.counts, _proof_note(sol))


def _proof_note(sol: Solution | None) -> list[str]:
    return [] if sol is None or sol.proven else ["solver time limit reached: plan is feasible, optimality not proven"]


def _price_capacity(model: Model, workload: Workload, churn: float, cutoff: float | None = None) -> Outcome:
    if workload.kind is WorkloadKind.INDEPENDENT:
        return _single(model, independent_costs(model.cand, workload), churn, cutoff=cutoff)
    sol = coupled.solve(model, workload, churn, independent_costs(model.cand, workload), beat=cutoff)
    return Outcome(sol.counts, sol.notes)


def _od_row(model: Model, od_cap: float) -> Row:
    od = np.flatnonzero(~model.cand.spot)
    return Row(od, model.cand.weighted[od], ub=od_cap + TOL)


def _least_interruptions(model: Model, od_cap: float, churn: float) -> Outcome:
    cand = model.cand
    first = model.solve(cand.rate, extra=Extra(rows=[_od_row(model, od_cap)]))
    if first is None:
        return Outcome(None)
    rate_cap = float(cand.rate @ first.counts)
    rows = [_od_row(model, od_cap), Row(np.arange(model.n), cand.rate, ub=rate_cap + TOL)]
    return _single(model, cand.price, churn, Extra(rows=rows))


def _least_max_pool(model: Model, od_cap: float, churn: float) -> Outcome:
    """Smallest ``z`` such that a plan holds at most ``z`` weighted GPUs in every spot pool
    (binary search over the values ``k * w_i`` a pool can hold; feasibility grows with
    ``z``), then the cheapest plan under that bound."""
    cand = model.cand
    spot = np.flatnonzero(cand.spot)
    most = np.minimum(cand.upper[spot], np.floor(model.target / cand.weighted[spot] + 1e-9) + 1)
    levels = np.unique(
        np.concatenate([[0.0]] + [w * np.arange(1, int(k) + 1) for w, k in zip(cand.weighted[spot], most)])
    )
    extra = Extra(rows=[_od_row(model, od_cap)])

    def under(z: float) -> np.ndarray:
        upper = cand.upper.copy()
        upper[spot] = np.minimum(upper[spot], np.floor(z / cand.weighted[spot] + 1e-9))
        return upper

    lo, hi = 0, len(levels) - 1
    found = model.solve(cand.price, extra=extra, upper=under(levels[hi]))
    if found is None:
        return Outcome(None)
    while lo < hi:
        mid = (lo + hi) // 2
        if model.solve(cand.price, extra=extra, upper=under(levels[mid])) is None:
            lo = mid + 1
        else:
            hi = mid
    sol = model.solve(cand.price, penalty=model.launch_costs(cand.price, churn), extra=extra, upper=under(levels[hi]))
    return Outcome(None if sol is None else sol.counts, _proof_note(sol))
