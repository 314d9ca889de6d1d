"""Exact pool-set reduction before the MILP: drop pools that can never be in an optimum.

Two pools are of the same *kind* when they have the same market and the same weighted
GPUs per node ``w``: they enter every constraint of the planner's MILP identically except
through their price ``p``, interruption rate ``lam`` and upper bound ``U`` (per-pool cap,
capacity hint). Pool ``i`` *dominates* pool ``j`` of the same kind when ``i`` precedes ``j``
in the order (p, lam, pool id) and ``lam_i <= lam_j`` and ``U_i >= U_j``.

Claim. Let ``K_k = max(min_pools, floor(T / w_k) + 1)`` for target ``T``. If every pool of
kind ``k`` that is dropped has at least ``K_k`` dominators and runs no instances now, then
some optimal plan of the full problem uses only kept pools, for every strategy's
objective (true cost, independent or coupled; price; interruption rate; the diversified
min-max share), for the best partial plan of an infeasible spec, and with the
new-launch penalty of a re-plan.

Proof. Every objective and constraint is non-decreasing in each pool's (p, lam) at fixed
counts and depends on the pool otherwise only through its kind, and every
objective is non-decreasing when a node is removed (costs are >= 0). (1) Among optimal
plans take one with the fewest nodes. A node of kind ``k`` in it is either needed for a
covering constraint (target or on-demand baseline ``B <= T``) or its pool is a single-node
pool needed for ``min_pools``, otherwise removing it leaves a plan no worse with fewer
nodes. In the first case ``w_k * (n_k - 1) < T`` where ``n_k`` counts this kind's nodes;
in the second at most ``min_pools`` spot pools are in use. So at most ``K_k`` pools of
kind ``k`` are in use. (2) Among such plans take one minimising the sum of the order ranks
of the pools in use. Suppose it uses a dropped pool ``j``. At most ``K_k - 1`` of ``j``'s
``K_k`` or more dominators are in use, so one dominator ``i`` is unused. Moving all of
``j``'s nodes to ``i`` keeps the covering sums (same kind), the pool count, the
per-pool bound (``U_i >= U_j``), the budget and every objective (``p_i <= p_j``,
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


def prune(cand: Candidates, target: float, min_pools: int) -> np.ndarray:
    """Indices (ascending) of the pools to keep; see the module docstring for why it is exact."""
    n = len(cand)
    if n == 0:
        return np.zeros(0, np.int64)
    order = np.lexsort((np.arange(n), cand.rate, cand.price, cand.weighted, cand.spot))
    keep = np.ones(n, bool)
    kinds = np.stack([cand.spot[order].astype(float), cand.weighted[order]])
    starts = np.flatnonzero(np.any(kinds[:, 1:] != kinds[:, :-1], axis=0)) + 1
    for group in np.split(order, starts):
        k = pool_bound(target, float(cand.weighted[group[0]]), min_pools)
        if len(group) <= k:
            continue
        upper = cand.upper[group]
        top = upper == upper.max()
        rates = cand.rate[group]
        if rates.min() == rates.max():   # one rate (on-demand): count earlier top-bound pools
            earlier = np.cumsum(top) - top
            dropped = earlier >= k
        else:
            dropped = _sweep(rates, top, k)
        dropped &= cand.current[group] == 0
        keep[group[dropped]] = False
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
