"""Exact pool-set reduction before the MILP: drop pools that can never be in an optimum.

Two pools are of the same *kind* when they have the same market, the same weighted GPUs
per node ``w`` and the same ``group`` (``fleet.planning.domains.Domains.group``: the same
finest capped failure domain -- zone, region or provider -- and the same quotas with
equal units per node): they enter every constraint of the planner's MILP identically
except through their price ``p``, interruption rate ``lam`` and upper bound ``U`` (per-pool
cap, capacity hint). Without domain caps or quotas every pool is in one group.

What the domain caps change: a pool dominated by cheaper, steadier pools of its market and
node size *in other zones* may be the only way to fill its own zone's share once those
zones are full, so dominance across domains is no longer valid and is not used; dominance
within one domain (and quota scope) is, because moving nodes between such pools changes no
domain load and no quota use (``tests/unit/test_planner_domains.py`` checks both). Pool ``i`` *dominates* pool ``j`` of the same kind when ``i`` precedes ``j``
in the order (p, lam, pool id) and ``lam_i <= lam_j`` and ``U_i >= U_j``.

Claim. Let ``K_k = max(min_pools, floor(T / w_k) + 1)`` for target ``T``. If every pool of
kind ``k`` that is dropped has at least ``K_k`` dominators and runs no instances now, then
some optimal plan of the full problem uses only kept pools, for every strategy's
objective (true cost, independent or coupled; price; interruption rate; the diversified
min-max share), for the best partial plan of an infeasible spec, and with the
new-launch penalty of a re-plan.

Proof. Every objective and constraint is non-decreasing in each pool's (p, lam) at fixed
counts and depends on the pool otherwise only through its kind, and every
objective is non-decreasing when a node is removed (costs are >= 0), and removing a node
keeps every cap and quota row (a domain's load only falls, and the spot part a cap is a
share of only grows when an on-demand node goes). (1) Among optimal
plans take one with the fewest nodes. A node of kind ``k`` in it is either needed for a
covering constraint (target or on-demand baseline ``B <= T``) or its pool is a single-node
pool needed for ``min_pools``, otherwise removing it leaves a plan no worse with fewer
nodes. In the first case ``w_k * (n_k - 1) < T`` where ``n_k`` counts this kind's nodes;
in the second at most ``min_pools`` spot pools are in use. So at most ``K_k`` pools of
kind ``k`` are in use. (2) Among such plans take one minimising the sum of the order ranks
of the pools in use. Suppose it uses a dropped pool ``j``. At most ``K_k - 1`` of ``j``'s
``K_k`` or more dominators are in use, so one dominator ``i`` is unused. Moving all of
``j``'s nodes to ``i`` keeps the covering sums, every domain load and quota use (same
kind), the pool count, the per-pool bound and row (``U_i >= U_j``), the budget and every objective (``p_i <= p_j``,
``lam_i <= lam_j``; ``i`` may run instances now, which only lowers the launch penalty),
and keeps the node count, but lowers the rank sum: a contradiction. []

Counting dominators only among the pools of a kind with the largest ``U`` keeps the
claim (they dominate on ``U`` whatever ``j``'s bound is) and makes the count a sweep:
in (p, lam, id) order, keep the ``K`` smallest rates seen so far in a heap; ``j`` has
``K`` dominators when the largest of them is ``<= lam_j``.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from fleet.planning.candidates import Candidates


def pool_bound(target: float, weighted_per_node: float, min_pools: int) -> int:
    """``K``: how many pools of one kind an optimal plan may need at most."""
    return max(min_pools, math.floor(target / weighted_per_node + 1e-9) + 1)


def prune(cand: Candidates, target: float, min_pools: int, group: np.ndarray | None = None,
          room: np.ndarray | None = None) -> np.ndarray:
    """Indices (ascending) of the pools to keep; ``group`` as in the module docstring (None:
    one group). ``room[i]``: most weighted GPUs any plan may hold in pool ``i``'s capped
    domain (``Domains.room``; inf without one): a domain holding at most ``room`` holds at
    most ``floor(room / w)`` nodes, so at most that many pools of a kind are in use there in
    *any* plan, and ``K`` shrinks to it. See the module docstring for why it is exact."""
    n = len(cand)
    if n == 0:
        return np.zeros(0, np.int64)
    group = np.zeros(n) if group is None else group.astype(float)
    order = np.lexsort((np.arange(n), cand.rate, cand.price, cand.weighted, cand.spot, group))
    keep = np.ones(n, bool)
    kinds = np.stack([group[order], cand.spot[order].astype(float), cand.weighted[order]])
    starts = np.flatnonzero(np.any(kinds[:, 1:] != kinds[:, :-1], axis=0)) + 1
    for members in np.split(order, starts):
        w = float(cand.weighted[members[0]])
        k = pool_bound(target, w, min_pools)
        if room is not None and np.isfinite(room[members[0]]):
            k = min(k, max(1, math.floor(float(room[members[0]]) / w + 1e-9)))
        if len(members) <= k:
            continue
        upper = cand.upper[members]
        top = upper == upper.max()
        rates = cand.rate[members]
        if rates.min() == rates.max():   # one rate (on-demand): count earlier top-bound pools
            earlier = np.cumsum(top) - top
            dropped = earlier >= k
        else:
            dropped = _sweep(rates, top, k)
        dropped &= cand.current[members] == 0
        keep[members[dropped]] = False
    return np.flatnonzero(keep)


def _sweep(rates: np.ndarray, top: np.ndarray, k: int) -> np.ndarray:
    """``dropped[j]``: at least ``k`` earlier top-bound pools have a rate ``<= rates[j]``."""
    dropped = np.zeros(len(rates), bool)
    heap: list[float] = []            # negated: the k smallest rates seen so far
    for j, (lam, is_top) in enumerate(zip(rates.tolist(), top.tolist())):
        if len(heap) == k and -heap[0] <= lam:
            dropped[j] = True
        if is_top:
            if len(heap) < k:
                heapq.heappush(heap, -lam)
            elif lam < -heap[0]:
                heapq.heapreplace(heap, -lam)
    return dropped
