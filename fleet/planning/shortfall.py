"""What to do when a spec cannot be met: the best partial plan and which limit binds.

The hard limits are the budget, account quotas, the zone, region, provider and pool caps,
capacity hints and the pools the rules allow; the target and the on-demand baseline are
what falls short. ``partial`` returns the plan that covers as much of the baseline as
possible, then as much of the target as possible, then costs the least, and a one-line
``shortfall`` naming the binding limit and by how much ("budget $60.00/h allows 27 of 32
weighted GPUs; the target needs $71.20/h"). A limit binds when lifting it alone would let
the plan cover the goal; they are tried in the order above.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from fleet.planning.candidates import Candidates
from fleet.planning.domains import FIELD, Limits
from fleet.planning.milp import TOL, Extra, Model, Row


def _fmt(x: float) -> str:
    return f"{round(x, 2):g}"


def _dollars_needed(need: float, budget: float) -> str:
    """``need`` in dollars rounded *up* to the cent, and always above the failing ``budget`` as shown:
    rounding to the nearest cent could print a need equal to (or below) the budget that fell short."""
    cents = math.ceil(need * 100 - 1e-6)
    cents = max(cents, round(budget * 100) + 1)
    return f"{cents / 100:.2f}"


def max_cover(
    cand: Candidates,
    target: float,
    baseline: float,
    budget: float | None,
    min_pools: int,
    on_demand_only: bool = False,
    floor_baseline: float = 0.0,
    limits: Limits | None = None,
) -> tuple[float, np.ndarray]:
    """Most weighted GPUs (up to ``target``; on-demand only: up to ``baseline``) the hard
    limits allow, keeping at least ``floor_baseline`` on-demand; and the counts reaching it."""
    model = Model(cand, target, baseline, budget, min_pools, cover=False, limits=limits)
    extra = Extra()
    goal = baseline if on_demand_only else target
    t = model.col(extra.column(cost=-1.0, upper=goal))
    pools = np.flatnonzero(~cand.spot) if on_demand_only else np.arange(len(cand))
    extra.rows.append(Row(np.append(pools, t), np.append(cand.weighted[pools], -1.0), lb=0.0))
    if floor_baseline > 0:
        od = np.flatnonzero(~cand.spot)
        extra.rows.append(Row(od, cand.weighted[od], lb=floor_baseline - TOL))
    sol = model.solve(np.zeros(len(cand)), extra=extra)
    if sol is None:  # cannot happen: all-zero counts meet every hard limit
        return 0.0, np.zeros(len(cand), np.int64)
    return min(float(sol.extra[0]), goal), sol.counts


def partial(
    cand: Candidates,
    target: float,
    baseline: float,
    budget: float | None,
    min_pools: int,
    cost: np.ndarray,
    limits: Limits,
) -> tuple[np.ndarray, str]:
    """The best partial plan and the shortfall message (see the module docstring)."""
    od_pools = int(np.count_nonzero(~cand.spot))
    got_base = 0.0
    if baseline > 0 and od_pools:
        got_base, _ = max_cover(cand, target, baseline, budget, min_pools, on_demand_only=True, limits=limits)
    got, _ = max_cover(cand, target, baseline, budget, min_pools, floor_baseline=got_base, limits=limits)
    best = Model(cand, got - TOL, got_base - TOL, budget, min_pools, limits=limits).solve(cost)
    counts = best.counts if best is not None else np.zeros(len(cand), np.int64)

    if baseline > 0 and not od_pools:
        why = f"no on-demand offer for the baseline of {_fmt(baseline)} weighted GPUs (only spot pools are allowed)"
    elif got_base < baseline - TOL:
        why = _binding(cand, baseline, baseline, budget, min_pools, got_base, limits, on_demand_only=True)
    else:
        why = _binding(cand, target, baseline, budget, min_pools, got, limits)
    return counts, why


def _binding(
    cand: Candidates,
    target: float,
    baseline: float,
    budget: float | None,
    min_pools: int,
    got: float,
    limits: Limits,
    on_demand_only: bool = False,
) -> str:
    what = "on-demand baseline weighted GPUs" if on_demand_only else "weighted GPUs"
    goal = baseline if on_demand_only else target

    def covers(c: Candidates = cand, b: float | None = budget, lim: Limits = limits) -> bool:
        return max_cover(c, target, baseline, b, min_pools, on_demand_only, limits=lim)[0] >= goal - TOL

    short = f"{_fmt(got)} of {_fmt(goal)} {what}"
    if budget is not None and covers(b=None):
        need = Model(cand, target, baseline, None, min_pools, limits=limits).solve(cand.price)
        tail = (
            f"; meeting the spec needs ${_dollars_needed(float(cand.price @ need.counts), budget)}/h"
            if need is not None
            else ""
        )
        return f"budget ${budget:.2f}/h allows {short}{tail}"
    if limits.quotas and covers(lim=limits.without(quotas=True)):
        return _quota_message(cand, limits, covers, short)
    spot_pools = int(np.count_nonzero(cand.spot))
    for level, share in reversed(limits.shares):  # provider, region, zone, then pool
        if level == "pool" or on_demand_only:
            continue
        if covers(lim=limits.without(level)):
            field = FIELD[level]
            return f"{field} {share:g} allows {short}; raise diversification.{field} or allow more {level}s"
    uncapped = replace(cand, upper=(cand.hint + cand.current).astype(float))
    if not on_demand_only and ((uncapped.upper > cand.upper).any() or limits.share("pool") is not None):
        pool_share = limits.share("pool")
        if pool_share is not None and covers(c=uncapped, lim=limits.without("pool")):
            return (
                f"max_pool_share {pool_share:g} over {spot_pools} allowed spot pool(s) allows {short}; "
                "raise diversification.max_pool_share or allow more regions/providers"
            )
    return f"capacity of the allowed pools (capacity hints) allows {short}"


def _quota_message(cand: Candidates, limits: Limits, covers, short: str) -> str:
    """Names the quota to raise: the first whose lifting alone covers the goal, else all."""
    quotas = limits.quotas
    for q, quota in enumerate(quotas):
        if covers(
            lim=Limits(limits.target, limits.baseline, limits.shares, limits.floor, quotas[:q] + quotas[q + 1 :])
        ):
            return (
                f"quota {quota.label} allows {short} (limit {quota.limit:g}, {quota.in_use:g} in use); "
                f"ask {quota.provider} to raise it"
            )
    return f"quotas {', '.join(q.label for q in quotas)} allow {short}; ask the providers to raise them"
