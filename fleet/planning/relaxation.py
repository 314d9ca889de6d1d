"""Relaxations of the planner's covering program, solved greedily or by HiGHS's LP.

All of them are lower bounds on what whole-node plans in a set of pools can cost: the
fractional cover (``cover_bound``: weighted GPUs >= target, on-demand >= baseline, within the
pools' bounds and per-group caps), the same with quota rows (``priced_bound``, whose duals
price the quotas), for every domain at once (``grouped_cover_bounds``), and a coupled job's
bound from the LP's (price, rate) frontier (``frontier_bound``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleet.planning import economics
from fleet.planning.candidates import Candidates
from fleet.spec import FleetSpec, Workload

#: Lambda multipliers (hours, times the domain's cheapest price) of the frontier bound.
FRONTIER_SLOPES = (0.01, 0.03, 0.06, 0.1, 0.15, 0.22, 0.3, 0.45, 0.7, 1.0, 1.6, 2.5)
FRONTIER_POINTS = 96


@dataclass(frozen=True)
class QuotaRows:
    """Account quotas as rows ``units @ n <= headroom`` (``fleet.planning.domains.Domains``)."""

    units: np.ndarray  # (quotas, pools)
    headroom: np.ndarray

    def of(self, pools: np.ndarray) -> QuotaRows:
        units = self.units[:, pools]
        hit = units.any(axis=1)
        return QuotaRows(units[hit], self.headroom[hit])


NO_QUOTAS = QuotaRows(np.zeros((0, 0)), np.zeros(0))


def cover_bound(
    cost: np.ndarray,
    weighted: np.ndarray,
    spot: np.ndarray,
    upper: np.ndarray,
    target: float,
    baseline: float,
    spread: Spread | None = None,
    od_most: float = np.inf,
) -> float:
    """``min cost.x`` s.t. ``weighted.x >= target``, ``baseline <=`` on-demand ``weighted.x <=
    od_most``, ``0 <= x <= upper`` and, with ``spread``, the spot weighted GPUs of each of its
    groups at most its cap (x real): inf when even that is infeasible.

    Greedy and exact: in an optimum the on-demand part is the cheapest-first fill (by cost
    per weighted GPU) of its amount ``A`` and the spot part the cheapest-first fill of
    ``target - A`` within the group caps (the groups are disjoint, so each group gives its
    cheapest first up to its cap); the cost is convex in ``A >= baseline``, minimal where the
    marginal ratios meet, which is where filling ``baseline`` from on-demand and then the rest
    cheapest-first from everything left ends (``od_most`` caps the on-demand pools of that second
    fill as one more disjoint group)."""
    return float(
        cover_bounds(np.asarray(cost, float)[None, :], weighted, spot, upper, target, baseline, spread, od_most)[0]
    )


def cover_bounds(
    costs: np.ndarray,
    weighted: np.ndarray,
    spot: np.ndarray,
    upper: np.ndarray,
    target: float,
    baseline: float,
    spread: Spread | None = None,
    od_most: float = np.inf,
) -> np.ndarray:
    """``cover_bound`` for each row of ``costs`` (one row per pricing), the same greedy fills
    done for all rows at once."""
    ratio = costs / weighted
    room = np.repeat((weighted * upper)[None, :], len(costs), axis=0)
    total = np.zeros(len(costs))
    od = np.flatnonzero(~spot)
    if baseline > 0:
        taken, short = _fill_rows(room[:, od], ratio[:, od], baseline)
        total += np.where(short, np.inf, _priced(taken, ratio[:, od]))
        room[:, od] -= taken
    rest = target - baseline
    if rest <= 0:
        return total
    if spread is not None:
        cols = np.flatnonzero(spot & (spread.group >= 0))
        room[:, cols] = _within_groups(room[:, cols], ratio[:, cols], spread.group[cols], spread.cap)
    if od_most < np.inf:
        room[:, od] = _within_rows(room[:, od], ratio[:, od], od_most - baseline)
    taken, short = _fill_rows(room, ratio, rest)
    return np.where(short, np.inf, total + _priced(taken, ratio))


def _priced(taken: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """Per row, the cost of what was taken (nothing taken costs nothing, at any ratio)."""
    with np.errstate(invalid="ignore"):
        return np.sum(np.where(taken > 0, taken * ratio, 0.0), axis=1)


def _within_rows(room: np.ndarray, ratio: np.ndarray, cap: float) -> np.ndarray:
    """Per row, what a cheapest-first fill of at most ``cap`` can take from each entry."""
    order = np.argsort(ratio, axis=1, kind="stable")
    r = np.take_along_axis(room, order, axis=1)
    before = np.zeros_like(r)
    np.cumsum(r[:, :-1], axis=1, out=before[:, 1:])  # exclusive: an infinite room stays out of its own sum
    out = np.empty_like(room)
    np.put_along_axis(out, order, np.clip(max(cap, 0.0) - before, 0.0, r), axis=1)
    return out


def _within_groups(room: np.ndarray, ratio: np.ndarray, group: np.ndarray, cap: float) -> np.ndarray:
    """``_within_rows`` in each group of entries (``group`` per column; finite rooms)."""
    if not room.shape[1]:
        return room
    order = np.lexsort((ratio, np.broadcast_to(group, ratio.shape)), axis=-1)
    r = np.take_along_axis(room, order, axis=1)
    g = group[order]
    before = np.cumsum(r, axis=1) - r
    start = np.ones(g.shape, bool)
    start[:, 1:] = g[:, 1:] != g[:, :-1]
    before -= np.maximum.accumulate(np.where(start, before, 0.0), axis=1)  # from the group's start
    out = np.empty_like(room)
    np.put_along_axis(out, order, np.clip(cap - before, 0.0, r), axis=1)
    return out


def _fill_rows(room: np.ndarray, ratio: np.ndarray, need: float) -> tuple[np.ndarray, np.ndarray]:
    """Per row, what a cheapest-first fill of ``need`` takes from each entry, and whether the row
    cannot hold ``need`` (its bound is then infinite)."""
    return _within_rows(room, ratio, need), np.sum(room, axis=1) < need - 1e-9


@dataclass(frozen=True)
class Spread:
    """A failure-domain cap for the bounds: each group (a zone or region code per pool, -1
    where none) holds at most ``cap`` spot weighted GPUs (``max(s * (T - B), c)`` bounds every
    plan's cap, since a plan holds at least the baseline ``B`` on-demand)."""

    group: np.ndarray
    cap: float
    #: ``(s, T, c, w_od)`` when the cap is the share rule's ``max(s * (T - OD), c)``
    #: (``fleet.planning.domains``): the LP bound then carries the rule's own rows, whose cap
    #: shrinks as on-demand nodes come in
    share: tuple[float, float, float, float] | None = None

    def of(self, pools: np.ndarray) -> Spread:
        return Spread(self.group[pools], self.cap, self.share)


def frontier_bound(
    spec: FleetSpec,
    cand: Candidates,
    pools: np.ndarray,
    floor: float,
    quotas: QuotaRows = NO_QUOTAS,
    nu: np.ndarray | None = None,
    spread: Spread | None = None,
) -> float:
    """A coupled job's lower bound in one domain from the LP's (price, rate) frontier.

    For ``mu >= 0`` every plan has ``P + mu * Lam >= g(mu)``, the cover LP priced at
    ``p + mu * lam`` (``cover_bound``), so ``P >= h(Lam) = max_mu g(mu) - mu * Lam``, decreasing
    in ``Lam``. With ``F`` increasing, a plan with ``Lam`` in ``[l_k, l_k+1]`` is worth
    ``P * F(Lam) >= h(l_k+1) * F(l_k)``, and beyond the last grid point ``>= g(0) * F(l_K)``.
    The smallest of those, and never less than ``floor`` (another valid bound), is returned.
    Quota rows enter ``g`` with the multipliers ``nu`` (``priced_bound``), which keeps it a
    lower bound."""
    w, s, u = cand.weighted[pools], cand.spot[pools], cand.upper[pools]
    price, rate = cand.price[pools], cand.rate[pools]
    target, baseline = float(spec.capacity.gpus), float(spec.capacity.on_demand_gpus)
    nu = nu if nu is not None else np.zeros(0)

    def g(mus: np.ndarray) -> np.ndarray:
        return priced_covers(price, rate, mus, w, s, u, target, baseline, spread, quotas=quotas, nu=nu)

    g0 = float(g(np.zeros(1))[0])
    if not np.isfinite(g0):
        return np.inf
    g0 = max(g0, 1e-12)
    mus = g0 * np.array(FRONTIER_SLOPES)
    gs = g(mus)
    return max(float(frontier(np.array([g0]), mus[None, :], gs[None, :], spec.workload)[0]), floor)


def priced_covers(
    price: np.ndarray,
    rate: np.ndarray,
    mus: np.ndarray,
    weighted: np.ndarray,
    spot: np.ndarray,
    upper: np.ndarray,
    target: float,
    baseline: float,
    spread: Spread | None = None,
    od_most: float = np.inf,
    *,
    quotas: QuotaRows = NO_QUOTAS,
    nu: np.ndarray,
) -> np.ndarray:
    """``g(mu)`` of ``frontier_bound`` for each of ``mus``: the cover priced at ``p + mu * lam``
    and, with quota multipliers ``nu``, at that plus ``nu @ units`` less ``nu @ headroom``
    (Lagrangian duality: any ``nu >= 0`` gives a bound; multipliers searched at other costs may
    be worse than none, so the larger of the two is taken)."""
    costs = price[None, :] + mus[:, None] * rate[None, :]
    args = (weighted, spot, upper, target, baseline, spread, od_most)
    plain = cover_bounds(costs, *args)
    if not len(nu) or not nu.any():
        return plain
    return np.maximum(plain, cover_bounds(costs + (nu @ quotas.units)[None, :], *args) - float(nu @ quotas.headroom))


def frontier(g0: np.ndarray, mus: np.ndarray, gs: np.ndarray, workload: Workload) -> np.ndarray:
    """Per row (a domain), the bound ``frontier_bound`` derives from ``g(0) = g0`` and
    ``g(mus[:, k]) = gs[:, k]`` (``g0 > 0`` finite, ``mus > 0``): ``h(Lam) = max(g0, max_k gs_k -
    mus_k * Lam)`` on a grid of ``FRONTIER_POINTS`` steps up to where ``h`` reaches ``g0``, times
    ``F`` at each step's start. Any set of ``mus`` gives a valid bound; more give a tighter one."""
    reach = np.max((gs - g0[:, None]) / mus, axis=1)  # h(Lam) = g(0) from here on
    out = g0 * economics.overhead_factor(0.0, workload)
    grow = np.flatnonzero(reach > 0)
    if not len(grow):
        return out
    g0, mus, gs, reach = g0[grow], mus[grow], gs[grow], reach[grow]
    grid = reach[:, None] * np.linspace(0.0, 1.0, FRONTIER_POINTS + 1)[None, :]
    h = np.maximum(g0[:, None], np.max(gs[:, :, None] - mus[:, :, None] * grid[:, None, :], axis=1))
    f = economics.overhead_factors(grid.ravel(), workload).reshape(grid.shape)
    out = np.array(out, float)
    out[grow] = np.minimum(np.min(h[:, 1:] * f[:, :-1], axis=1), g0 * f[:, -1])
    return out


def priced_bound(
    cost: np.ndarray,
    weighted: np.ndarray,
    spot: np.ndarray,
    upper: np.ndarray,
    target: float,
    baseline: float,
    quotas: QuotaRows,
    spread: Spread | None = None,
    od_most: float = np.inf,
) -> tuple[float, np.ndarray]:
    """``cover_bound`` with the quota rows ``units @ x <= headroom`` added: the LP itself,
    solved by HiGHS (``inf`` when it is infeasible: no plan in these pools meets the spec
    within the quotas). Returns the bound and multipliers ``nu >= 0`` for the quotas (the LP's
    duals): by Lagrangian duality ``cover_bound(c + nu @ units) - nu @ headroom`` is a lower
    bound for any costs ``c`` and any such ``nu``, which ``frontier_bound`` uses. Without
    quotas this is ``cover_bound`` (greedy, no solver)."""
    if not len(quotas.headroom):
        return cover_bound(cost, weighted, spot, upper, target, baseline, spread, od_most), np.zeros(0)
    from fleet.planning.highs import Program, solve_lp

    n = len(cost)
    rows = [(np.arange(n), weighted, target, np.inf)]
    od = np.flatnonzero(~spot)
    if baseline > 0 or od_most < np.inf:
        rows.append((od, weighted[od], baseline, od_most))
    first_quota = len(rows)
    for q in range(len(quotas.headroom)):
        cols = np.flatnonzero(quotas.units[q])
        rows.append((cols, quotas.units[q, cols], -np.inf, float(quotas.headroom[q])))
    capped = np.zeros(0, np.int64)
    if spread is not None:
        capped = np.flatnonzero(spot & (spread.group >= 0))
        for g in np.unique(spread.group[capped]):
            cols = capped[spread.group[capped] == g]
            rows.append((cols, weighted[cols], -np.inf, spread.cap))
    columns = n
    if spread is not None and spread.share is not None and len(capped):
        # the share rule's rows with its binary u relaxed to [0, 1] (one u, column n):
        # L(D) + s * OD - M1 * u <= s * T and L(D) + M2 * u <= c + M2, valid for some optimal plan
        s_, t_, c_, w_od = spread.share
        m1, m2 = c_ + s_ * w_od, s_ * t_ - c_
        columns = n + 1
        for g in np.unique(spread.group[capped]):
            cols = capped[spread.group[capped] == g]
            rows.append(
                (
                    np.concatenate([cols, od, [n]]),
                    np.concatenate([weighted[cols], s_ * weighted[od], [-m1]]),
                    -np.inf,
                    s_ * t_,
                )
            )
            rows.append((np.append(cols, n), np.append(weighted[cols], m2), -np.inf, c_ + m2))
    start = np.concatenate([[0], np.cumsum([len(r[0]) for r in rows])])
    pad = np.zeros(columns - n)
    prog = Program(
        c=np.concatenate([np.asarray(cost, float), pad]),
        lb=np.zeros(columns),
        ub=np.concatenate([np.asarray(upper, float), pad + 1]),
        integrality=np.zeros(columns),
        start=start,
        index=np.concatenate([r[0] for r in rows]),
        value=np.concatenate([r[1] for r in rows]).astype(float),
        row_lb=np.array([r[2] for r in rows], float),
        row_ub=np.array([r[3] for r in rows], float),
    )
    solved = solve_lp(prog, row_duals=True)
    if solved is None:
        return np.inf, np.zeros(len(quotas.headroom))
    z, _, duals = solved
    nu = np.maximum(-duals[first_quota : first_quota + len(quotas.headroom)], 0.0)
    return max(z, cover_bound(cost, weighted, spot, upper, target, baseline, spread, od_most)), nu


def grouped_cover_bounds(
    cost: np.ndarray,
    weighted: np.ndarray,
    spot: np.ndarray,
    upper: np.ndarray,
    target: float,
    baseline: float,
    members: list[np.ndarray],
) -> np.ndarray:
    """``cover_bound`` (no spread) of every domain's pools at once: the same greedy fills
    (baseline from on-demand, then the rest from all that is left, cheapest per weighted GPU
    first), done for all domains in a few array passes.

    The fills sort on one float key per pool (domain number plus the ratio scaled below 1), so
    ratios closer than about ``1e-12`` of the largest may be taken out of order; such a fill
    costs at most ``target * 1e-12 * max ratio`` more than the greedy one, which is subtracted:
    the result stays a lower bound."""
    if not members:
        return np.zeros(0)
    pools = np.concatenate(members)
    group = np.repeat(np.arange(len(members)), [len(m) for m in members])
    ratio = cost[pools] / weighted[pools]
    finite = np.isfinite(ratio)
    top = float(ratio[finite].max(initial=0.0))
    # an infinite cost sorts last in its domain (taking it makes that domain's bound infinite)
    key = group + np.where(finite, ratio / (top * (1 + 1e-9)) * 0.999 if top > 0 else 0.0, 0.9995)
    room = weighted[pools] * upper[pools]
    total = np.zeros(len(members))
    if baseline > 0:
        od_room = np.where(spot[pools], 0.0, room)
        filled = _grouped_fill(od_room, key, group, baseline, len(members))
        total += np.bincount(group, weights=_taken(ratio, filled), minlength=len(members))
        total[_short(od_room, group, baseline, len(members))] = np.inf
        room = room - filled
    rest = target - baseline
    if rest > 0:
        filled = _grouped_fill(room, key, group, rest, len(members))
        total += np.bincount(group, weights=_taken(ratio, filled), minlength=len(members))
        total[_short(room, group, rest, len(members))] = np.inf
    return total - target * 1e-12 * top


def _taken(ratio: np.ndarray, filled: np.ndarray) -> np.ndarray:
    """``ratio * filled`` with nothing taken costing nothing (an infinite ratio included)."""
    with np.errstate(invalid="ignore"):
        return np.where(filled > 0, ratio * filled, 0.0)


def _grouped_fill(room: np.ndarray, key: np.ndarray, group: np.ndarray, need: float, groups: int) -> np.ndarray:
    """Per entry, what a fill of ``need`` within each group in ``key`` order takes from ``room``
    (``group`` ascending, as ``key`` orders the groups)."""
    order = np.argsort(key, kind="stable")
    g = group[order]
    r = np.minimum(room[order], need)  # no entry gives more than need: same fill, no inf
    cum = np.cumsum(r)
    starts = np.searchsorted(g, np.arange(groups))
    base = np.r_[0.0, cum][starts][g]
    before = cum - r - base
    out = np.zeros(len(room))
    out[order] = np.clip(need - before, 0.0, room[order])
    return out


def _short(room: np.ndarray, group: np.ndarray, need: float, groups: int) -> np.ndarray:
    """Groups whose ``room`` cannot hold ``need``."""
    held = np.bincount(group, weights=np.minimum(room, need + 1.0), minlength=groups)
    return held < need - 1e-9
