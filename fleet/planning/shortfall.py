"""What to do when a spec cannot be met: the best partial plan and which limit binds.

The hard limits are the budget, per-pool caps, capacity hints and the pools the rules
allow; the target and the on-demand baseline are what falls short. ``partial`` returns
the plan that covers as much of the baseline as possible, then as much of the target as
possible, then costs the least, and a one-line ``shortfall`` naming the binding limit and
by how much ("budget $60.00/h allows 27 of 32 weighted GPUs; the target needs $71.20/h").
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fleet.planning.candidates import Candidates
from fleet.planning.milp import TOL, Extra, Model, Row


def _fmt(x: float) -> str:
    return f"{round(x, 2):g}"


def max_cover(cand: Candidates, target: float, baseline: float, budget: float | None, min_pools: int,
              on_demand_only: bool = False, floor_baseline: float = 0.0) -> tuple[float, np.ndarray]:
    """Most weighted GPUs (up to ``target``; on-demand only: up to ``baseline``) the hard
    limits allow, keeping at least ``floor_baseline`` on-demand; and the counts reaching it."""
    model = Model(cand, target, baseline, budget, min_pools, cover=False)
    extra = Extra()
    goal = baseline if on_demand_only else target
    t = model.col(extra.column(cost=-1.0, upper=goal))
    pools = np.flatnonzero(~cand.spot) if on_demand_only else np.arange(len(cand))
    extra.rows.append(Row(np.append(pools, t), np.append(cand.weighted[pools], -1.0), lb=0.0))
    if floor_baseline > 0:
        od = np.flatnonzero(~cand.spot)
        extra.rows.append(Row(od, cand.weighted[od], lb=floor_baseline - TOL))
    sol = model.solve(np.zeros(len(cand)), extra=extra)
    if sol is None:     # cannot happen: all-zero counts meet every hard limit
        return 0.0, np.zeros(len(cand), np.int64)
    return min(float(sol.extra[0]), goal), sol.counts


def partial(cand: Candidates, target: float, baseline: float, budget: float | None, min_pools: int,
            cost: np.ndarray, max_pool_share: float) -> tuple[np.ndarray, str]:
    """The best partial plan and the shortfall message (see the module docstring)."""
    od_pools = int(np.count_nonzero(~cand.spot))
    got_base = 0.0
    if baseline > 0 and od_pools:
        got_base, _ = max_cover(cand, target, baseline, budget, min_pools, on_demand_only=True)
    got, _ = max_cover(cand, target, baseline, budget, min_pools, floor_baseline=got_base)
    best = Model(cand, got - TOL, got_base - TOL, budget, min_pools).solve(cost)
    counts = best.counts if best is not None else np.zeros(len(cand), np.int64)

    if baseline > 0 and not od_pools:
        why = f"no on-demand offer for the baseline of {_fmt(baseline)} weighted GPUs (only spot pools are allowed)"
    elif got_base < baseline - TOL:
        why = _binding(cand, baseline, baseline, budget, min_pools, got_base, max_pool_share, on_demand_only=True)
    else:
        why = _binding(cand, target, baseline, budget, min_pools, got, max_pool_share)
    return counts, why


def _binding(cand: Candidates, target: float, baseline: float, budget: float | None, min_pools: int,
             got: float, max_pool_share: float, on_demand_only: bool = False) -> str:
    what = "on-demand baseline weighted GPUs" if on_demand_only else "weighted GPUs"
    goal = baseline if on_demand_only else target
    short = f"{_fmt(got)} of {_fmt(goal)} {what}"
    if budget is not None:
        free, _ = max_cover(cand, target, baseline, None, min_pools, on_demand_only)
        if free >= goal - TOL:
            need = Model(cand, target, baseline, None, min_pools).solve(cand.price)
            tail = f"; meeting the spec needs ${cand.price @ need.counts:.2f}/h" if need is not None else ""
            return f"budget ${budget:.2f}/h allows {short}{tail}"
    uncapped = replace(cand, upper=(cand.hint + cand.current).astype(float))
    if not on_demand_only and (uncapped.upper > cand.upper).any():
        free, _ = max_cover(uncapped, target, baseline, budget, min_pools)
        if free >= goal - TOL:
            spot_pools = int(np.count_nonzero(cand.spot))
            return (f"max_pool_share {max_pool_share:g} over {spot_pools} allowed spot pool(s) allows {short}; "
                    "raise diversification.max_pool_share or allow more regions/providers")
    return f"capacity of the allowed pools (capacity hints) allows {short}"
