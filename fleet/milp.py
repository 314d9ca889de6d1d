"""The planner's mixed-integer program over a set of candidate pools, solved by HiGHS.

Columns: one integer instance count ``n_i`` per pool, then, where needed, the new-launch
part ``z_i >= n_i - current_i`` of pools running instances now (so a re-plan can charge
only new launches), any extra columns a strategy adds, and binaries ``y_i`` (spot pool
``i`` in use) and ``v`` (the plan uses spot) for ``min_pools``. Rows: weighted GPUs >=
target, on-demand weighted GPUs >= baseline, total $/h <= budget, ``min_pools`` spot pools
in use whenever spot is used, plus the strategy's extra rows. Per-pool caps and capacity
hints are column bounds. ``Model.solve`` is deterministic: same inputs, same answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog
from scipy.sparse import coo_array, vstack

from fleet.candidates import Candidates
from fleet.highs import milp

#: HiGHS settings: prove optimality (no relative gap), bounded run time, quiet.
HIGHS_OPTIONS = {"mip_rel_gap": 0.0, "disp": False, "time_limit": 60.0, "presolve": True}
#: Above this many pools, drop pools by LP reduced costs before the MILP (exact).
FIXING_MIN_POOLS = 48
#: Tolerance for covering and budget checks on rounded solutions (weighted GPUs, $/h).
TOL = 1e-6


@dataclass
class Row:
    """``lb <= sum(coef * x[col]) <= ub`` over the model's columns."""

    cols: np.ndarray
    coefs: np.ndarray
    lb: float = -np.inf
    ub: float = np.inf


@dataclass
class Extra:
    """Columns and rows a strategy adds: continuous columns with bounds and costs."""

    costs: list[float] = field(default_factory=list)
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    def column(self, cost: float, lower: float = 0.0, upper: float = np.inf) -> int:
        """Adds a column; returns its offset among the extra columns."""
        self.costs.append(cost)
        self.lower.append(lower)
        self.upper.append(upper)
        return len(self.costs) - 1


@dataclass
class Solution:
    counts: np.ndarray        # int64 per pool
    extra: np.ndarray         # values of the extra columns
    proven: bool              # HiGHS proved optimality (False: time limit hit)
    x: np.ndarray | None = None   # every column


class Model:
    """The fixed part of the program; ``solve`` adds an objective and a strategy's extras.

    Column layout: ``n`` (one per pool), ``z`` (one per pool running instances now), the
    strategy's extra columns, then -- only when needed -- ``y`` (one per spot pool) and ``v``.
    """

    def __init__(self, cand: Candidates, target: float, baseline: float, budget: float | None,
                 min_pools: int, *, cover: bool = True, fixing: bool = True):
        self.cand = cand
        self.fixing = fixing                # drop pools by LP reduced costs first (exact)
        self.n = len(cand)
        self.target, self.baseline, self.budget = target, baseline, budget
        self.cover = cover                  # False: no covering rows (the partial-plan stages)
        self.penalised = np.flatnonzero(cand.current > 0)
        self.spot_idx = np.flatnonzero(cand.spot)
        self.min_pools = min_pools if min_pools >= 2 and len(self.spot_idx) else 0
        self.base_cols = self.n + len(self.penalised)

    def feasible(self, counts: np.ndarray) -> bool:
        """Whether ``counts`` meets every row and bound of the fixed part (within ``TOL``)."""
        cand = self.cand
        if (counts < 0).any() or (counts > cand.upper).any():
            return False
        if self.cover and (cand.weighted @ counts < self.target - TOL
                           or cand.weighted[~cand.spot] @ counts[~cand.spot] < self.baseline - TOL):
            return False
        if self.budget is not None and cand.price @ counts > self.budget + TOL:
            return False
        return self._enough_pools(counts)

    def _enough_pools(self, counts: np.ndarray) -> bool:
        used = int(np.count_nonzero(counts[self.spot_idx]))
        return not (self.min_pools and 0 < used < self.min_pools)

    def col(self, extra_offset: int) -> int:
        """Index of the strategy's extra column number ``extra_offset``."""
        return self.base_cols + extra_offset

    def solve(self, cost: np.ndarray, penalty: np.ndarray | None = None, extra: Extra | None = None,
              upper: np.ndarray | None = None) -> Solution | None:
        """Minimise ``cost . n (+ penalty . new launches) + extra costs``; ``None`` if infeasible.

        ``penalty[i]`` is charged per instance launched in pool ``i`` beyond ``current_i``;
        ``upper`` replaces the pools' bounds (it may only tighten them).
        ``min_pools`` is enforced lazily: without it first, and with its binaries only if the
        plan found breaks it (a relaxation's optimum that is feasible is optimal).
        """
        extra = extra or Extra()
        upper = self.cand.upper if upper is None else upper
        sol = self._solve(cost, penalty, extra, upper, with_pools=False)
        if sol is None or self._enough_pools(sol.counts):
            return sol
        return self._solve(cost, penalty, extra, upper, with_pools=True)

    def _solve(self, cost: np.ndarray, penalty: np.ndarray | None, extra: Extra, upper: np.ndarray,
               with_pools: bool) -> Solution | None:
        cand, n = self.cand, self.n
        spot = self.spot_idx if with_pools else np.zeros(0, np.int64)
        y0 = self.base_cols + len(extra.costs)
        v = y0 + len(spot)
        total = v + (1 if with_pools else 0)
        c = np.zeros(total)
        c[:n] = cost
        lb = np.zeros(total)
        ub = np.full(total, np.inf)
        ub[:n] = upper
        integrality = np.zeros(total)
        integrality[:n] = 1
        rows = list(extra.rows)
        if penalty is not None:
            c[:n] += np.where(cand.current == 0, penalty, 0.0)
            p = self.penalised
            c[n:self.base_cols] = penalty[p]
            rows += [Row(np.array([i, z]), np.array([1.0, -1.0]), ub=float(cand.current[i]))
                     for i, z in zip(p, range(n, self.base_cols))]
        c[self.base_cols:y0] = extra.costs
        lb[self.base_cols:y0] = extra.lower
        ub[self.base_cols:y0] = extra.upper
        if with_pools:
            ys = np.arange(y0, v)
            integrality[y0:] = 1
            ub[y0:] = 1
            rows += [Row(np.array([i, y]), np.array([1.0, -1.0]), lb=0) for i, y in zip(spot, ys)]
            # spot in use -> v = 1: sum of spot nodes <= M * v, M = the most spot nodes worth having
            enough = np.maximum(cand.current, np.floor(max(self.target, 0.0) / cand.weighted + 1e-9) + 1)
            big = float(np.minimum(upper, enough)[spot].sum())
            rows.append(Row(np.append(spot, v), np.append(np.ones(len(spot)), -big), ub=0))
            rows.append(Row(np.append(ys, v), np.append(np.ones(len(ys)), -float(self.min_pools)), lb=0))
        idx = np.arange(n)
        if self.cover:
            rows.append(Row(idx, cand.weighted, lb=self.target))
            if self.baseline > 0:
                od = np.flatnonzero(~cand.spot)
                rows.append(Row(od, cand.weighted[od], lb=self.baseline))
        if self.budget is not None:
            rows.append(Row(idx, cand.price, ub=self.budget))
        return self._run(c, integrality, lb, ub, rows)

    def _run(self, c: np.ndarray, integrality: np.ndarray, lb: np.ndarray, ub: np.ndarray,
             rows: list[Row]) -> Solution | None:
        a = _matrix(rows, len(c))
        row_lb = np.array([row.lb for row in rows])
        row_ub = np.array([row.ub for row in rows])
        if self.fixing and self.n > FIXING_MIN_POOLS:
            relaxed = _relaxation(c, lb, ub, a, row_lb, row_ub)
            if relaxed is None:
                return None          # the relaxation is infeasible, so is the program
            z_lp, reduced = relaxed
            reduced = reduced[:self.n]
            ub = ub.copy()
            size = FIXING_MIN_POOLS
            while True:
                # an incumbent from the open pools of least reduced cost, then close every pool
                # whose reduced cost alone lifts the relaxation above it (exact, LP duality)
                is_open = ub[:self.n] > 0
                ranked = np.flatnonzero(is_open)[np.argsort(reduced[is_open], kind="stable")]
                inside = ranked[:size]
                ub_r = ub.copy()
                ub_r[:self.n] = 0
                ub_r[inside] = ub[inside]
                incumbent = self._milp(c, integrality, lb, ub_r, a, row_lb, row_ub)
                if incumbent is not None:
                    z_ub = float(c @ incumbent.x)
                    ub[:self.n][z_lp + reduced > z_ub + 1e-6 * max(1.0, abs(z_ub))] = 0
                    still_open = np.flatnonzero(ub[:self.n] > 0)
                    if incumbent.proven and np.isin(still_open, inside).all():
                        return incumbent      # every pool that can matter was in the restricted program
                    if len(still_open) <= 4 * size:
                        break
                elif size >= len(ranked):
                    return None
                size *= 4
        return self._milp(c, integrality, lb, ub, a, row_lb, row_ub)

    def _milp(self, c: np.ndarray, integrality: np.ndarray, lb: np.ndarray, ub: np.ndarray, a,
              row_lb: np.ndarray, row_ub: np.ndarray) -> Solution | None:
        constraints = [LinearConstraint(a, row_lb, row_ub)] if a is not None else []
        res = milp(c, integrality=integrality, bounds=Bounds(lb, ub), constraints=constraints,
                   options=HIGHS_OPTIONS)
        if res.x is None:
            return None
        x = res.x
        return Solution(counts=np.rint(x[:self.n]).astype(np.int64), extra=x[self.base_cols:],
                        proven=res.status == 0, x=x)


def _matrix(rows: list[Row], columns: int):
    if not rows:
        return None
    r = np.concatenate([np.full(len(row.cols), k) for k, row in enumerate(rows)])
    cols = np.concatenate([row.cols for row in rows]).astype(np.int64)
    vals = np.concatenate([row.coefs for row in rows]).astype(float)
    return coo_array((vals, (r, cols)), shape=(len(rows), columns)).tocsr()


def _relaxation(c: np.ndarray, lb: np.ndarray, ub: np.ndarray, a, row_lb: np.ndarray,
                row_ub: np.ndarray) -> tuple[float, np.ndarray] | None:
    """LP relaxation: its optimum and the reduced costs of the columns at their lower bound
    (for any feasible x, ``c.x >= z_lp + reduced_j * (x_j - lb_j)``)."""
    a_ub, b_ub = None, None
    if a is not None:
        upper, lower = np.isfinite(row_ub), np.isfinite(row_lb)
        a_ub = vstack([a[upper], -a[lower]]).tocsr()
        b_ub = np.concatenate([row_ub[upper], -row_lb[lower]])
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=np.column_stack([lb, ub]), method="highs")
    if res.status == 2:
        return None
    if res.status != 0:
        return -np.inf, np.zeros(len(c))     # no bound: nothing is dropped
    return float(res.fun), np.maximum(res.lower.marginals, 0.0)
