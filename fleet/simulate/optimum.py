"""The offline optimum: the cheapest fleet that knows the whole trace (an integer program).

Variables per pool ``p`` (every replayed spot pool and the cheapest on-demand pool per
weighted GPU) and tick ``t``: ``a[p,t]`` integer nodes alive (paid) and ``r[p,t]`` nodes
ready. Constraints: ``a[p,t] <= capacity[p,t]`` (the trace); ``r[p,t] <= a[p,t-j]`` for
``j = 0..cold_ticks`` (a node is ready only after being alive through its cold start;
``a`` before tick 0 is 0); ``sum_p w_p r[p,t] >= target`` for every tick from
``cold_ticks`` on; ``sum_p price_p a[p,t] <= budget`` when the spec has one. Objective: the
paid node-hours' cost. Removing the newest nodes first makes ``r = min_j a[p,t-j]``
reachable, so this is the exact optimum of the simulator's model at 100% availability and
a lower bound on the cost of any policy that achieves it. Solved with HiGHS
(``fleet.planning.highs``); with a ``time_limit`` that runs out, the best schedule found is
returned with a status that says so (its cost is then an upper bound of the optimum's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint
from scipy.sparse import coo_matrix

from fleet.model import Market
from fleet.planning.highs import milp
from fleet.simulate.market import Replay
from fleet.spec import FleetSpec


@dataclass(frozen=True)
class Optimum:
    """``cost`` in USD over the replay, ``None`` when no schedule meets the target (budget)."""

    cost: float | None
    status: str
    counts: dict[str, tuple[int, ...]]  # alive nodes per pool and tick


def pools_of(spec: FleetSpec, replay: Replay) -> list[tuple[str, float, float, tuple[int, ...] | None]]:
    """(pool id, weight, $/h, capacity per tick or None) of the pools the program may use."""
    out: list[tuple[str, float, float, tuple[int, ...] | None]] = []
    od = []
    for o in replay.offers:
        w = spec.weight(o.accelerator) * o.gpus
        if w <= 0:
            continue
        if o.market is Market.ON_DEMAND:
            od.append((o.price_per_hour / w, o.pool.id, w, o.price_per_hour))
        else:
            out.append((o.pool.id, w, o.price_per_hour, tuple(replay.capacity[o.pool.id])))
    if od:
        _, pid, w, price = min(od)
        out.append((pid, w, price, None))
    return out


def solve(
    spec: FleetSpec, replay: Replay, cold_ticks: int = 1, target: float | None = None, time_limit: float | None = None
) -> Optimum:
    """The offline optimum of ``replay`` for ``spec``'s target (see the module doc)."""
    target = float(spec.capacity.gpus) if target is None else target
    pools = pools_of(spec, replay)
    T, P, k = replay.ticks, len(pools), cold_ticks
    if not P:
        return Optimum(None, "no pools", {})
    n = 2 * P * T  # a[p,t] at p*T+t, r[p,t] at P*T + p*T+t
    A = lambda p, t: p * T + t  # noqa: E731
    R = lambda p, t: P * T + p * T + t  # noqa: E731
    gap_h = replay.tick_seconds / 3600
    c = np.zeros(n)
    lo, hi = np.zeros(n), np.zeros(n)
    integrality = np.zeros(n)
    rows, cols, vals, blo, bhi = [], [], [], [], []
    row = 0
    for p, (_pid, w, price, cap) in enumerate(pools):
        most = int(np.ceil(target / w))
        for t in range(T):
            c[A(p, t)] = price * gap_h
            hi[A(p, t)] = most if cap is None else min(most, cap[t])
            integrality[A(p, t)] = 1
            hi[R(p, t)] = most if t >= k else 0
            for j in range(k + 1):
                if t - j < 0 or t < k:
                    continue
                rows += [row, row]
                cols += [R(p, t), A(p, t - j)]
                vals += [1.0, -1.0]
                blo.append(-np.inf)
                bhi.append(0.0)
                row += 1
    for t in range(k, T):
        for p, (_pid, w, _price, _cap) in enumerate(pools):
            rows.append(row)
            cols.append(R(p, t))
            vals.append(w)
        blo.append(target)
        bhi.append(np.inf)
        row += 1
    budget = spec.budget.max_per_hour
    if budget is not None:
        for t in range(T):
            for p, (_pid, _w, price, _cap) in enumerate(pools):
                rows.append(row)
                cols.append(A(p, t))
                vals.append(price)
            blo.append(-np.inf)
            bhi.append(budget)
            row += 1
    matrix = coo_matrix((vals, (rows, cols)), shape=(row, n)).tocsr()
    options = {"time_limit": time_limit} if time_limit else {}
    res = milp(
        c,
        integrality=integrality,
        bounds=Bounds(lo, hi),
        constraints=LinearConstraint(matrix, blo, bhi),
        options=options,
    )
    if res.x is None or res.status not in (0, 1):
        return Optimum(None, res.message if res.status != 1 else "time limit reached before any schedule was found", {})
    x = np.round(res.x).astype(int)
    counts = {pid: tuple(int(v) for v in x[p * T : (p + 1) * T]) for p, (pid, *_rest) in enumerate(pools)}
    return Optimum(
        float(c @ x), "optimal" if res.status == 0 else "time limit: best schedule found, not proven optimal", counts
    )
