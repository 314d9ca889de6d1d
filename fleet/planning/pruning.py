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
domain load and no quota use (``tests/unit/test_planner_domains.py`` checks both).

*Dominance* is over a pair of per-pool keys ``(a, b)``, each one the objective or a row
reads the pool through and none the worse for being smaller: ``(p, lam)`` in general
(the default), and for a strategy whose objective is one linear cost ``c`` per node and
whose rows read no rate (``lowest-price``, ``price-capacity-optimized`` for independent
nodes) ``(c, p)`` with a budget and ``(c, c)`` without. Pool ``i`` *dominates* pool ``j``
of the same kind when ``i`` precedes ``j`` in the order (a, b, pool id) and ``b_i <= b_j``.

Claim. Let ``K_k = max(min_pools, floor(T / w_k) + 1)`` for target ``T``. If every pool of
kind ``k`` that is dropped has at least ``K_k`` dominators and runs no instances now, then
some optimal plan of the full problem uses only kept pools, for every strategy's
objective (true cost, independent or coupled; price; interruption rate; the diversified
min-max share), for the best partial plan of an infeasible spec, and with the
new-launch penalty of a re-plan.

Proof. Every objective and row is non-decreasing in each pool's keys at fixed counts and
depends on the pool otherwise only through its kind, and every objective is
non-decreasing when a node is removed (costs are >= 0), and removing a node keeps every
cap and quota row (a domain's load only falls, and the spot part a cap is a share of only
grows when an on-demand node goes). (1) Among optimal plans take one with the fewest
nodes. A node of kind ``k`` in it is either needed for a covering constraint (target or
on-demand baseline ``B <= T``) or its pool is a single-node pool needed for ``min_pools``,
otherwise removing it leaves a plan no worse with fewer nodes. In the first case ``w_k *
(n_k - 1) < T`` where ``n_k`` counts this kind's nodes; in the second at most
``min_pools`` spot pools are in use. So at most ``K_k`` pools of kind ``k`` are in use.
(2) Among such plans take one minimising the sum, over its nodes, of the order rank of
each node's pool. Suppose it uses a dropped pool ``j``. At most ``K_k - 1`` of ``j``'s
``K_k`` or more dominators are in use, so one dominator ``i`` is unused. Moving one node
of ``j`` to ``i`` keeps the covering sums, every domain load and quota use (same kind),
the node count and ``i``'s bound (every pool may hold at least one node: capacity hints
of 0 are left out by the rules and the per-pool cap is at least one node; a strategy that
tightens bounds does it alike for a kind), does not lower the number of spot pools in use
(``i`` joins, ``j`` leaves at most), keeps the budget and does not raise any objective (the
keys of ``i`` are no larger; ``i`` may run instances now, which only lowers the launch
penalty), but lowers the rank sum: a contradiction. []

So the count is a sweep: in (a, b, id) order, keep the ``K`` smallest ``b`` seen so far in
a heap; ``j`` has ``K`` dominators when the largest of them is ``<= b_j`` (with one key,
when ``K`` pools of its kind precede it).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from fleet.planning.candidates import Candidates


def pool_bound(target: float, weighted_per_node: float, min_pools: int) -> int:
    """``K``: how many pools of one kind an optimal plan may need at most."""
    return max(min_pools, math.floor(target / weighted_per_node + 1e-9) + 1)


def dominance_keys(cand: Candidates, cost: np.ndarray | None, budget: bool) -> tuple[np.ndarray, np.ndarray]:
    """The ``(a, b)`` keys of the module docstring: ``(p, lam)`` when ``cost`` is ``None``
    (objectives or rows that read rates); for a strategy whose only objective is ``cost`` per
    node, ``(cost, p)`` when there is a ``budget`` row, else ``(cost, cost)``."""
    if cost is None:
        return cand.price, cand.rate
    return cost, cand.price if budget else cost


def prune(cand: Candidates, target: float, min_pools: int, group: np.ndarray | None = None,
          room: np.ndarray | None = None, keys: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Indices (ascending) of the pools to keep; ``group`` as in the module docstring (None:
    one group); ``keys`` the dominance keys (``dominance_keys``; default ``(p, lam)``).
    ``room[i]``: most weighted GPUs any plan may hold in pool ``i``'s capped domain
    (``Domains.room``; inf without one): a domain holding at most ``room`` holds at most
    ``floor(room / w)`` nodes, so at most that many pools of a kind are in use there in *any*
    plan, and ``K`` shrinks to it. See the module docstring for why it is exact."""
    n = len(cand)
    if n == 0:
        return np.zeros(0, np.int64)
    a, b = keys if keys is not None else (cand.price, cand.rate)
    group = np.zeros(n) if group is None else group.astype(float)
    order = np.lexsort((np.arange(n), b, a, cand.weighted, cand.spot, group))
    keep = np.ones(n, bool)
    kinds = np.stack([group[order], cand.spot[order].astype(float), cand.weighted[order]])
    starts = np.flatnonzero(np.any(kinds[:, 1:] != kinds[:, :-1], axis=0)) + 1
    one_key = b is a
    for members in np.split(order, starts):
        w = float(cand.weighted[members[0]])
        k = pool_bound(target, w, min_pools)
        if room is not None and np.isfinite(room[members[0]]):
            k = min(k, max(1, math.floor(float(room[members[0]]) / w + 1e-9)))
        if len(members) <= k:
            continue
        second = b[members]
        if one_key or second.min() == second.max():   # one key (or one rate: on-demand)
            dropped = np.arange(len(members)) >= k
        else:
            dropped = _sweep(second, k)
        dropped &= cand.current[members] == 0
        keep[members[dropped]] = False
    return np.flatnonzero(keep)


def _sweep(keys: np.ndarray, k: int) -> np.ndarray:
    """``dropped[j]``: at least ``k`` earlier pools have a key ``<= keys[j]``."""
    dropped = np.zeros(len(keys), bool)
    heap: list[float] = []            # negated: the k smallest keys seen so far
    for j, key in enumerate(keys.tolist()):
        if len(heap) == k and -heap[0] <= key:
            dropped[j] = True
        if len(heap) < k:
            heapq.heappush(heap, -key)
        elif key < -heap[0]:
            heapq.heapreplace(heap, -key)
    return dropped
