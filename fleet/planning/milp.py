"""The planner's mixed-integer program over a set of candidate pools, solved by HiGHS.

Columns: one integer instance count ``n_i`` per pool, then, where needed, the new-launch
part ``z_i >= n_i - current_i`` of pools running instances now (so a re-plan can charge
only new launches), any extra columns a strategy adds, and binaries ``y_i`` (spot pool
``i`` in use) and ``v`` (the plan uses spot) for ``min_pools``. Rows: weighted GPUs >=
target, on-demand weighted GPUs >= baseline, total $/h <= budget, ``min_pools`` spot pools
in use whenever spot is used, the account quotas and the pool, zone, region and provider
caps (``fleet.planning.domains``: caps lazily, with one binary per capped level), plus the
strategy's extra rows. Per-pool caps and capacity hints are also column bounds.
``Model.solve`` is deterministic: same inputs, same answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Final, Literal

import numpy as np

from fleet.planning import highs
from fleet.planning.candidates import Candidates
from fleet.planning.domains import Domains, Limits
from fleet.planning.twins import find_twins, singletons

#: HiGHS settings: prove optimality (no relative gap); ``Model`` adds its time limit. The
#: primal heuristics (feasibility jump, RINS, RENS, root reduced cost) only look for
#: incumbents, so turning them off changes no optimum; on the planner's programs they cost
#: most of the solve (feasibility jump about 10 ms per MILP whatever its size; the others
#: two thirds of a coupled plan's MILP time at 100k pools), and the planner hands HiGHS good
#: bounds and cutoffs instead.
HIGHS_OPTIONS = {
    "mip_rel_gap": 0.0,
    "presolve": "on",
    "mip_heuristic_run_feasibility_jump": False,
    "mip_heuristic_run_rins": False,
    "mip_heuristic_run_rens": False,
    "mip_heuristic_run_root_reduced_cost": False,
}
#: Above this many pools, drop pools by LP reduced costs before the MILP (exact).
FIXING_MIN_POOLS = 48
#: Solve the full program once at most this many times the restricted program's pools stay
#: open (a speed knob; exactness does not depend on it).
FULL_SOLVE_RATIO = 12
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
    counts: np.ndarray  # int64 per pool
    extra: np.ndarray  # values of the extra columns
    proven: bool  # HiGHS proved optimality (False: time limit hit)
    objective: float


class Model:
    """The fixed part of the program; ``solve`` adds an objective and a strategy's extras.

    ``reduce=False`` turns off the exact reductions (twin merging, reduced-cost fixing):
    the plain MILP, for checks. Callers speak in pools: per-pool cost, penalty and bound arrays, rows over pool indices
    ``0..n-1`` plus extra columns (``col``). Inside, twin pools share one column
    (``fleet.planning.twins``) and the column layout is: one integer count per column, ``z`` per
    column running instances now, the extra columns, then -- only when needed -- ``y``
    (spot pools in use, per spot column) and ``v`` (the plan uses spot).
    """

    def __init__(
        self,
        cand: Candidates,
        target: float,
        baseline: float,
        budget: float | None,
        min_pools: int,
        *,
        cover: bool = True,
        reduce: bool = True,
        time_limit: float = 60.0,
        limits: Limits | None = None,
    ):
        self.cand = cand
        self.n = len(cand)
        self.fixing = reduce  # drop columns by LP reduced costs first (exact)
        self.reduce = reduce
        self.options = {**HIGHS_OPTIONS, "time_limit": time_limit}
        self.target, self.baseline, self.budget = target, baseline, budget
        self.cover = cover  # False: no covering rows (the partial-plan stages)
        self.spot_idx = np.flatnonzero(cand.spot)
        self.min_pools = min_pools if min_pools >= 2 and len(self.spot_idx) else 0
        self.domains = Domains.bind(limits, cand) if limits is not None else None
        self._layout()

    def _layout(self) -> None:
        """Twin columns (pools with a pool-cap row of their own stay alone) and the layout."""
        cand = self.cand
        if self.reduce:
            group = self.domains.group if self.domains is not None else None
            alone = self.domains.pools_with_rows() if self.domains is not None else None
            self.twins = find_twins(cand, group, alone)
        else:
            self.twins = singletons(len(cand))
        self.view = self.twins.merged(cand)
        self.cols = self.twins.columns
        self.penalised = np.flatnonzero(self.view.current > 0)
        self.base_cols = self.cols + len(self.penalised)

    def feasible(self, counts: np.ndarray) -> bool:
        """Whether per-pool ``counts`` meet every row and bound of the fixed part (within ``TOL``)."""
        cand = self.cand
        if (counts < 0).any() or (counts > cand.upper).any():
            return False
        if self.cover and (
            cand.weighted @ counts < self.target - TOL
            or cand.weighted[~cand.spot] @ counts[~cand.spot] < self.baseline - TOL
        ):
            return False
        if self.budget is not None and cand.price @ counts > self.budget + TOL:
            return False
        if self.domains is not None and (self.domains.broken(counts) or not self.domains.quotas_ok(counts)):
            return False
        return self._enough_pools(counts)

    def _enough_pools(self, counts: np.ndarray) -> bool:
        used = int(np.count_nonzero(counts[self.spot_idx]))
        return not (self.min_pools and 0 < used < self.min_pools)

    def col(self, extra_offset: int) -> int:
        """Row index of the strategy's extra column number ``extra_offset``."""
        return self.n + extra_offset

    def launch_costs(self, cost: np.ndarray, churn: float) -> np.ndarray | None:
        """A re-plan's ``penalty`` for ``solve``: per instance launched beyond what runs in its
        pool, ``churn`` of its ``cost`` (a restart) plus its weighted GPUs at the dearest
        ``cost`` per weighted GPU among the candidates, so replacing running instances by
        launches of the same GPUs never pays and a rerun launches only the gap. ``None`` when
        this is no re-plan (``churn`` 0)."""
        if not churn:
            return None
        weighted = self.cand.weighted
        return cost * churn + weighted * float(np.max(cost / weighted))

    def solve(
        self,
        cost: np.ndarray,
        penalty: np.ndarray | None = None,
        extra: Extra | None = None,
        upper: np.ndarray | None = None,
        cutoff: float = np.inf,
    ) -> Solution | None:
        """Minimise ``cost . n (+ penalty . new launches) + extra costs``; ``None`` if infeasible
        or if no plan's objective is below ``cutoff``.

        ``penalty[i]`` is charged per instance launched in pool ``i`` beyond ``current_i``;
        ``upper`` replaces the pools' bounds (it may only tighten them, equally for twins).
        ``min_pools`` and the diversification caps are enforced lazily: without them first,
        then with the binaries of ``min_pools`` and the rows of the caps the plan found breaks,
        until a plan breaks none (a relaxation's optimum that is feasible is optimal). Cap rows
        stay with the model for later solves.
        """
        extra = extra or Extra()
        upper = self.cand.upper if upper is None else upper
        with_pools = False

        while True:
            sol = self._run(self._build(cost, penalty, extra, upper, with_pools=with_pools), cutoff)
            if sol is _MORE_ROWS or (sol is not None and sol.objective < cutoff and self._more_cap_rows(sol.counts)):
                continue
            if sol is None or sol.objective >= cutoff:
                return None
            if not with_pools and not self._enough_pools(sol.counts):
                with_pools = True
                continue
            return sol

    def _more_cap_rows(self, counts: np.ndarray) -> bool:
        """Activates the rows of the caps ``counts`` breaks; whether any was new."""
        if self.domains is None or not self.domains.activate(counts):
            return False
        if self.reduce and len(self.domains.pools_with_rows()):
            self._layout()
        return True

    def lower_bound(self, cost: np.ndarray, penalty: np.ndarray | None = None, extra: Extra | None = None) -> float:
        """A lower bound on ``solve``'s objective (its LP relaxation); ``inf`` if infeasible."""
        relaxed = _relaxation(self._build(cost, penalty, extra or Extra(), self.cand.upper, with_pools=False))
        return np.inf if relaxed is None else relaxed[0]

    def _row(self, row: Row, extra_at: int) -> Row:
        """A caller's row (pools, then extra columns at ``n + k``) over this model's columns."""
        pools = row.cols < self.n
        cols, coefs = self.twins.column_row(row.cols[pools], row.coefs[pools])
        return Row(
            np.concatenate([cols, row.cols[~pools] - self.n + extra_at]),
            np.concatenate([coefs, row.coefs[~pools]]),
            row.lb,
            row.ub,
        )

    def _build(
        self, cost: np.ndarray, penalty: np.ndarray | None, extra: Extra, upper: np.ndarray, with_pools: bool
    ) -> _Program:
        view, n, first = self.view, self.cols, self.twins.first
        spot = np.flatnonzero(view.spot) if with_pools else np.zeros(0, np.int64)
        y0 = self.base_cols + len(extra.costs)
        v = y0 + len(spot)
        u0 = v + (1 if with_pools else 0)
        levels = self.domains.binary_levels() if self.domains is not None else []
        total = u0 + len(levels)
        c = np.zeros(total)
        c[:n] = cost[first]
        lb = np.zeros(total)
        ub = np.full(total, np.inf)
        ub[:n] = self.twins.column_bound(upper)
        integrality = np.zeros(total)
        integrality[:n] = 1
        rows = [self._row(r, self.base_cols) for r in extra.rows]
        if penalty is not None:
            c[:n] += np.where(view.current == 0, penalty[first], 0.0)
            p = self.penalised
            c[n : self.base_cols] = penalty[first][p]
            rows += [
                Row(np.array([i, z]), np.array([1.0, -1.0]), ub=float(view.current[i]))
                for i, z in zip(p, range(n, self.base_cols))
            ]
        c[self.base_cols : y0] = extra.costs
        lb[self.base_cols : y0] = extra.lower
        ub[self.base_cols : y0] = extra.upper
        if with_pools:
            ys = np.arange(y0, v)
            integrality[y0:] = 1
            ub[y0:v] = self.twins.size[spot]  # pools in use in a column: at most its members
            ub[v] = 1
            rows += [Row(np.array([i, y]), np.array([1.0, -1.0]), lb=0) for i, y in zip(spot, ys)]
            # spot in use -> v = 1: sum of spot nodes <= M * v, M = the most spot nodes worth having
            enough = np.maximum(view.current, np.floor(max(self.target, 0.0) / view.weighted + 1e-9) + 1)
            big = float(np.minimum(ub[:n], enough)[spot].sum())
            rows.append(Row(np.append(spot, v), np.append(np.ones(len(spot)), -big), ub=0))
            rows.append(Row(np.append(ys, v), np.append(np.ones(len(ys)), -float(self.min_pools)), lb=0))
        if self.domains is not None:
            integrality[u0:] = 1
            ub[u0:] = 1
            rows += self.domains.rows(
                self.twins.column_row, view.weighted, np.flatnonzero(~view.spot), lambda level: u0 + levels.index(level)
            )
        idx = np.arange(n)
        if self.cover:
            rows.append(Row(idx, view.weighted, lb=self.target))
            if self.baseline > 0:
                od = np.flatnonzero(~view.spot)
                rows.append(Row(od, view.weighted[od], lb=self.baseline))
        if self.budget is not None:
            rows.append(Row(idx, view.price, ub=self.budget))
        return _Program(
            highs.Program(
                c,
                lb,
                ub,
                integrality,
                *_matrix(rows, total),
                np.array([r.lb for r in rows]),
                np.array([r.ub for r in rows]),
            ),
            len(extra.costs),
        )

    def _run(self, prog: _Program, cutoff: float) -> Solution | None | Literal[_Signal.MORE_ROWS]:
        """Solves ``prog`` (after reduced-cost fixing above ``FIXING_MIN_POOLS`` columns).
        Returns ``_MORE_ROWS`` when a restricted program's plan breaks caps whose rows were not
        active: their rows are active now and ``prog`` is stale. Every cap row is valid, so
        adding it before the full program is solved changes no optimum, and spares a full
        solve whose plan would likely break it too."""
        ub = prog.ub
        if self.fixing and self.cols > FIXING_MIN_POOLS:
            relaxed = _relaxation(prog)
            if relaxed is None:
                return None  # the relaxation is infeasible, so is the program
            z_lp, reduced = relaxed
            if z_lp >= cutoff:
                return None  # nothing below the cutoff
            reduced = reduced[: self.cols]
            ub = ub.copy()
            size = FIXING_MIN_POOLS
            while True:
                # an incumbent from the open pools of least reduced cost, then close every pool
                # whose reduced cost alone lifts the relaxation above it (exact, LP duality)
                is_open = ub[: self.cols] > 0
                ranked = np.flatnonzero(is_open)[np.argsort(reduced[is_open], kind="stable")]
                inside = ranked[:size]
                ub_r = ub.copy()
                ub_r[: self.cols] = 0
                ub_r[inside] = ub[inside]
                incumbent = self._milp(prog, ub_r, cutoff)
                if incumbent is not None and self._more_cap_rows(incumbent.counts):
                    return _MORE_ROWS
                if incumbent is None and size >= len(ranked):
                    return None  # every open pool was in the restricted program
                z_ub = min(incumbent.objective if incumbent else np.inf, cutoff)
                if np.isfinite(z_ub):
                    ub[: self.cols][z_lp + reduced > z_ub + 1e-6 * max(1.0, abs(z_ub))] = 0
                    still_open = np.flatnonzero(ub[: self.cols] > 0)
                    if incumbent and incumbent.proven and np.isin(still_open, inside).all():
                        return incumbent  # every pool that can matter was in the restricted program
                    if len(still_open) <= FULL_SOLVE_RATIO * size:
                        break  # a larger restricted program would cost about what the full one does
                size *= 4
        return self._milp(prog, ub, cutoff)

    def _milp(self, prog: _Program, ub: np.ndarray, cutoff: float = np.inf) -> Solution | None:
        res = highs.solve_milp(prog.program, ub, self.options, cutoff)
        if res.x is None:
            return None
        x = res.x
        counts = self.twins.spread(np.rint(x[: self.cols]).astype(np.int64))
        return Solution(
            counts=counts,
            extra=x[self.base_cols : self.base_cols + prog.extras],
            proven=res.proven,
            objective=float(prog.c @ x),
        )


class _Signal(Enum):
    MORE_ROWS = "more rows"


#: ``Model._run``'s answer when new cap rows were activated and the program must be rebuilt.
_MORE_ROWS: Final = _Signal.MORE_ROWS


def _matrix(rows: list[Row], columns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``rows`` as a row-wise sparse matrix (start, index, value), repeated entries summed."""
    lengths = np.array([len(row.cols) for row in rows], np.int64)
    if not len(rows):
        return np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0)
    index = np.concatenate([row.cols for row in rows]).astype(np.int64)
    value = np.concatenate([row.coefs for row in rows]).astype(float)
    row_of = np.repeat(np.arange(len(rows)), lengths)
    key = row_of * columns + index
    if len(key) > 1 and not (np.diff(key) > 0).all():
        merged, inverse = np.unique(key, return_inverse=True)
        value = np.bincount(inverse.reshape(-1), weights=value, minlength=len(merged))
        row_of, index = merged // columns, merged % columns
        lengths = np.bincount(row_of, minlength=len(rows))
    return np.concatenate([[0], np.cumsum(lengths)]), index, value


@dataclass
class _Program:
    """One MILP (``fleet.planning.highs.Program``) and how many strategy columns follow the
    counts and ``z``."""

    program: highs.Program
    extras: int

    @property
    def c(self) -> np.ndarray:
        return self.program.c

    @property
    def ub(self) -> np.ndarray:
        return self.program.ub


def _relaxation(prog: _Program) -> tuple[float, np.ndarray] | None:
    """LP relaxation: its optimum and the reduced costs of the columns at their lower bound
    (for any feasible x, ``c.x >= z_lp + reduced_j * (x_j - lb_j)``); ``None`` if infeasible."""
    relaxed = highs.solve_lp(prog.program)
    if relaxed is None:
        return None
    z, duals = relaxed
    return z, np.maximum(duals, 0.0)
