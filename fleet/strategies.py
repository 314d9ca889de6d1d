"""The four allocation strategies as objectives over ``fleet.milp.Model``.

* ``price-capacity-optimized`` (default): minimise the expected true cost per hour, the
  price inflated by interruption overhead under the workload model
  (``fleet.economics``). Independent nodes: exact, the cost is linear. Coupled job: the
  cost ``P * F(Lam)`` is not linear; we solve its tangent plane at a reference fleet, move
  the reference to the plan found and repeat until a plan repeats (at most
  ``COUPLED_ROUNDS``), keeping the plan of least true cost. The first reference is the
  fleet running now, else the independent-nodes plan.
* ``lowest-price``: minimise $/h, interruptions ignored.
* ``capacity-optimized``: minimise the fleet's expected interruptions per hour
  ``sum(n_i * lam_i)``, then $/h among those plans. On-demand never interrupts, so the
  market split is fixed first: on-demand weighted GPUs may not exceed what the
  price-capacity-optimized plan uses (or the baseline); within that, spot goes to the
  pools (and node sizes) least likely to be interrupted.
* ``diversified``: with the same market split, minimise the largest spot pool's weighted
  GPUs, then $/h among those plans. Spot capacity is thus spread over as many pools, in
  units as small, as the rules (node sizes, caps, min_pools, budget) allow.

Every strategy charges a re-plan's new launches ``LAUNCH_PENALTY`` of their hourly cost
(a restart amortised over ``PLAN_HORIZON_HOURS``) so a fleet that still fits keeps its
pools. Deterministic: same inputs, same plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import numpy as np

from fleet import economics
from fleet.milp import TOL, Extra, Model, Row, Solution
from fleet.spec import Strategy, Workload, WorkloadKind

#: Hours a plan is expected to stay in force; a new launch's restart is spread over them.
PLAN_HORIZON_HOURS = 24.0
COUPLED_ROUNDS = 8


def launch_penalty(workload: Workload) -> float:
    """Share of a node's hourly cost charged per new launch in a re-plan."""
    return max(workload.restart_seconds, 60.0) / 3600 / PLAN_HORIZON_HOURS


@dataclass
class Outcome:
    counts: np.ndarray | None            # None: the spec is infeasible
    notes: list[str] = field(default_factory=list)


def independent_costs(model: Model, workload: Workload) -> np.ndarray:
    """``p_i * F(lam_i)`` per pool (F computed once per distinct rate)."""
    rates, inverse = np.unique(model.cand.rate, return_inverse=True)
    factors = np.array([economics.overhead_factor(r, workload) for r in rates])
    return model.cand.price * factors[inverse]


def fleet_true_cost(model: Model, counts: np.ndarray, workload: Workload) -> float:
    c = model.cand
    used = np.flatnonzero(counts)
    return economics.fleet_true_cost_per_hour(
        ((int(counts[i]), float(c.price[i]), float(c.rate[i])) for i in used), workload)


def new_launches(model: Model, counts: np.ndarray) -> np.ndarray:
    return np.maximum(counts - model.cand.current, 0)


def solve(strategy: Strategy, model: Model, workload: Workload, replan: bool) -> Outcome:
    """Runs ``strategy``; ``replan`` charges new launches (the model's candidates carry
    ``current``)."""
    churn = launch_penalty(workload) if replan else 0.0
    if strategy is Strategy.LOWEST_PRICE:
        return _single(model, model.cand.price, churn)
    if strategy is Strategy.PRICE_CAPACITY_OPTIMIZED:
        return _price_capacity(model, workload, churn)
    split = _price_capacity(model, workload, 0.0)
    if split.counts is None:
        return split
    od_cap = max(float(model.cand.weighted[~model.cand.spot] @ split.counts[~model.cand.spot]), model.baseline)
    stage = _least_interruptions if strategy is Strategy.CAPACITY_OPTIMIZED else _least_max_pool
    return stage(model, od_cap, churn)


def _single(model: Model, cost: np.ndarray, churn: float, extra: Extra | None = None) -> Outcome:
    sol = model.solve(cost, penalty=cost * churn if churn else None, extra=extra)
    return Outcome(None if sol is None else sol.counts, _proof_note(sol))


def _proof_note(sol: Solution | None) -> list[str]:
    return [] if sol is None or sol.proven else ["solver time limit reached: plan is feasible, optimality not proven"]


def _price_capacity(model: Model, workload: Workload, churn: float) -> Outcome:
    if workload.kind is WorkloadKind.INDEPENDENT:
        return _single(model, independent_costs(model, workload), churn)
    return _coupled(model, workload, churn)


def _coupled(model: Model, workload: Workload, churn: float) -> Outcome:
    cand = model.cand
    spot_rates = cand.rate[cand.rate > 0]
    floor_rate = float(spot_rates.min()) if len(spot_rates) else 0.0
    if floor_rate == 0.0:        # no interruptible pool: the cost is the price
        return _single(model, cand.price, churn)
    if churn and cand.current.any():
        ref = cand.current
    else:
        first = _single(model, independent_costs(model, workload), 0.0)
        if first.counts is None:
            return first
        ref = first.counts

    def value(counts: np.ndarray) -> float:
        true = fleet_true_cost(model, counts, workload)
        price = float(cand.price @ counts)
        factor = true / price if price > 0 else 1.0
        return true + churn * factor * float(cand.price @ new_launches(model, counts))

    best: tuple[float, int, np.ndarray] | None = None
    seen: set[bytes] = set()
    notes: list[str] = []
    for rnd in range(COUPLED_ROUNDS):
        tangent = economics.coupled_tangent(float(cand.price @ ref), max(float(cand.rate @ ref), floor_rate), workload)
        cost = tangent.price_coef * cand.price + tangent.rate_coef * cand.rate
        sol = model.solve(cost, penalty=cost * churn if churn else None)
        if sol is None:
            return Outcome(None)
        notes += _proof_note(sol)
        v = value(sol.counts)
        if best is None or v < best[0] - 1e-9:
            best = (v, rnd, sol.counts)
        key = sol.counts.tobytes()
        if key in seen:
            break
        seen.add(key)
        ref = sol.counts
    else:
        notes.append(f"coupled-workload linearisation did not settle in {COUPLED_ROUNDS} rounds; "
                     "kept the plan of least expected true cost")
    assert best is not None
    if churn and model.feasible(cand.current) and value(cand.current) <= best[0] + 1e-9:
        return Outcome(cand.current.copy(), notes)
    return Outcome(best[2], sorted(set(notes)))


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
    cand = model.cand
    extra = Extra(rows=[_od_row(model, od_cap)])
    top = model.col(extra.column(cost=1.0))
    spot = np.flatnonzero(cand.spot)
    extra.rows += [Row(np.array([i, top]), np.array([cand.weighted[i], -1.0]), ub=0.0) for i in spot]
    first = model.solve(np.zeros(model.n), extra=extra)
    if first is None:
        return Outcome(None)
    largest = float(first.extra[0])
    rows = [_od_row(model, od_cap)] + [Row(np.array([i]), np.array([cand.weighted[i]]), ub=largest + TOL)
                                       for i in spot]
    return _single(model, cand.price, churn, Extra(rows=rows))

