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

**Capacity.** Dominators need not be unused, only have room. Let ``e_i`` be the nodes pool ``i``
can hold in a plan: its bound ``U_i``, and for a spot pool also the pool cap
``floor(max(s * (T - OD), c) / w)`` (``fleet.planning.domains``; ``OD`` the plan's on-demand
weighted GPUs, the same for every pool of a kind). Claim': a pool ``j`` of kind ``k`` (running
nothing now) may also be dropped when its dominators hold at least ``min_pools`` pools (spot
kinds; none needed for on-demand ones) and ``sum_i e_i >= R`` in every plan, where ``R`` bounds the
nodes of kind ``k`` in a plan with fewest nodes. Proof: as above, take an optimal plan with fewest
nodes and then least rank sum using ``j``. If a dominator is unused, move a node there as
before. Otherwise all dominators are in use, hence at least ``min_pools`` spot pools besides
``j``; and one dominator ``i`` has ``n_i < e_i``, else the kind holds ``sum e_i + 1 > R`` nodes.
Moving one node from ``j`` to ``i`` keeps everything the first proof lists; the spot pools in
use drop by at most one (``j``) and stay ``>= min_pools``; the rank sum falls. []

``R``: a node of kind ``k`` is needed for covering or (single-node pool) for ``min_pools``;
the condition is the same for every node of the kind (same ``w``), so either all are needed
for covering -- on-demand: ``n_k < T / w + 1``; spot: the spot load is below ``T - OD + w``,
so ``n_k < y + 1`` with ``y = (T - OD) / w`` -- or there are at most ``min_pools``. The spot
check runs over ``y`` in ``[0, (T - B) / w]`` (``OD >= B``), cut at the integers and where the
pool cap changes (``y = m / s``); on a piece ``[a, b)`` the cap is constant, ``e_i >=
min(U_i, g(a))``, and ``R <= max(floor(a) + 1, min_pools)``; a piece where ``g = 0`` admits no
node of the kind and needs nothing. Summarised per pool as one number ``v_i`` (a lower bound of
``e_i / R`` over every piece), the condition is ``sum v_i >= 1``. It reads the bounds as given,
so a strategy that tightens them (``diversified``) prunes without it.

So the count is a sweep: in (a, b, id) order, count the earlier pools with ``b`` no larger
(and add up their ``v``); ``j`` has ``K`` dominators when that count reaches ``K`` (with one key,
every earlier pool of its kind dominates it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


#: ``sum v >= 1`` is checked in floats with this slack. Every ``v`` of a kind is ``U_i / R`` or one
#: common ``g / r``, so an exact sum below 1 is below it by at least ``1 / (R * r)`` (over ``1e-8``
#: for any target under 10,000 nodes), far beyond the rounding of the sum.
_HELD_TOL = 1e-10


@dataclass(frozen=True)
class PoolCaps:
    """What the capacity rule (module docstring) reads of the spec: target ``T``, on-demand
    baseline ``B``, the pool share ``s`` and the smallest spot node ``c``
    (``fleet.planning.domains.Limits``)."""

    target: float
    baseline: float
    share: float
    floor: float

    def room(self, weighted: float, spot: bool, upper: np.ndarray, min_pools: int) -> np.ndarray:
        """``v`` per pool of one kind (bounds ``upper``): a lower bound on ``e_i / R`` over
        every plan; their sum over a pool's dominators reaching 1 lets it go."""
        w = weighted
        if not spot:
            need = math.floor(self.target / w + 1e-9) + 1
            return np.minimum(upper, need) / need
        top = max(self.target - self.baseline, 0.0) / w
        steps = np.arange(1, math.floor(top + 1e-9) + 1, dtype=float)
        bends = (
            np.arange(1, math.floor(top * self.share + 1e-9) + 1, dtype=float) / self.share
            if self.share > 0
            else np.zeros(0)
        )
        a = np.unique(np.concatenate([[0.0], steps, bends[bends <= top + 1e-9]]))
        g = np.floor(np.maximum(self.share * w * a, self.floor) / w + 1e-9)
        r = np.maximum(np.floor(a + 1e-9) + 1, min_pools)
        fits = g >= 1
        if not fits.any():
            return np.full(len(upper), np.inf)  # no node of this kind fits any plan
        worst = float(np.min(g[fits] / r[fits]))
        return np.minimum(upper / float(r[fits].max()), worst)


def prune(
    cand: Candidates,
    target: float,
    min_pools: int,
    group: np.ndarray | None = None,
    room: np.ndarray | None = None,
    keys: tuple[np.ndarray, np.ndarray] | None = None,
    caps: PoolCaps | None = None,
) -> np.ndarray:
    """Indices (ascending) of the pools to keep; ``group`` as in the module docstring (None:
    one group); ``keys`` the dominance keys (``dominance_keys``; default ``(p, lam)``).
    ``room[i]``: most weighted GPUs any plan may hold in pool ``i``'s capped domain
    (``Domains.room``; inf without one): a domain holding at most ``room`` holds at most
    ``floor(room / w)`` nodes, so at most that many pools of a kind are in use there in *any*
    plan, and ``K`` shrinks to it. ``caps``: also drop by the capacity rule (the pools'
    ``upper`` must be the bounds every solve uses). See the module docstring for why it is exact."""
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
        spot = bool(cand.spot[members[0]])
        k = pool_bound(target, w, min_pools)
        if room is not None and np.isfinite(room[members[0]]):
            k = min(k, max(1, math.floor(float(room[members[0]]) / w + 1e-9)))
        if len(members) <= k and caps is None:
            continue
        v = caps.room(w, spot, cand.upper[members], min_pools) if caps is not None else None
        least = min_pools if spot else 0  # dominators needed besides their room
        second = b[members]
        if one_key or second.min() == second.max():  # one key (or one rate: on-demand)
            before = np.arange(len(members))
            dropped = before >= k
            if v is not None:
                held = np.concatenate([[0.0], np.cumsum(v)[:-1]])
                dropped |= (before >= least) & (held >= 1 - _HELD_TOL)
        else:
            dropped = _sweep(second, k, v, least)
        dropped &= cand.current[members] == 0
        keep[members[dropped]] = False
    return np.flatnonzero(keep)


def _sweep(keys: np.ndarray, k: int, v: np.ndarray | None = None, least: int = 0) -> np.ndarray:
    """``dropped[j]``: at least ``k`` earlier pools have a key ``<= keys[j]``, or (with ``v``) at
    least ``least`` do and their ``v`` add up to 1 (Fenwick trees over key ranks)."""
    ranks = np.searchsorted(np.unique(keys), keys, side="right")  # 1-based, ties share a rank
    size = int(ranks.max())
    count = [0] * (size + 1)
    held = [0.0] * (size + 1)
    values = v.tolist() if v is not None else None
    dropped = np.zeros(len(keys), bool)
    for j, r in enumerate(ranks.tolist()):
        c, h, i = 0, 0.0, r
        while i > 0:
            c += count[i]
            h += held[i]
            i -= i & -i
        dropped[j] = c >= k or (values is not None and c >= least and h >= 1 - _HELD_TOL)
        i = r
        x = values[j] if values is not None else 0.0
        while i <= size:
            count[i] += 1
            held[i] += x
            i += i & -i
    return dropped
