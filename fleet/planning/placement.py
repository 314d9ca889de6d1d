"""Placement: every node of the fleet inside one zone, region or provider, the best one exactly.

A synchronous (coupled) job cannot span slow links, so the spec's ``placement`` level
(``FleetSpec.placement_level``) says which failure domain all its nodes must share. The
plans allowed are then the union over the domains ``D`` of that level of the plans using
only ``D``'s pools, so the best plan is the best of the per-domain optima: one small
problem per domain, which is also what makes placed plans fast.

**Exact without solving every domain.** ``lower_bounds`` gives, per domain, a value no
plan in it can beat: the fractional cover (the LP of weighted GPUs >= target and on-demand
>= baseline within the pools' bounds, solved greedily by cost per weighted GPU) priced at
``p * F(lam)`` per node for ``price-capacity-optimized`` and at ``p`` for ``lowest-price``.
For independent nodes that is the objective's own LP relaxation. For a coupled job,
``P * F(Lam) = sum(n_i p_i F(Lam)) >= sum(n_i p_i F(lam_i))`` since ``Lam >= lam_i`` for every
pool in use (``n_i >= 1``) and ``F`` increases; a coupled job's domains then get a tighter
bound from the (price, rate) frontier of the same LP (``_frontier_bound``). Quotas enter the
LP as rows (``priced_bound``, solved by HiGHS; their duals price them in the frontier) and the cap of the finest failure domain
left below the placement level as a disjoint capacity per group (``Spread``); both only add
valid rows, so the bounds stay bounds. Domains are solved in increasing bound order, each only
for plans worth less than the runner-up so far (the coupled walk starts from that value), and
the search stops once a bound exceeds the runner-up's value: no later domain can beat the
winner or the runner-up, so both are exact. The bounds come in two steps (``Bounds``): every
domain's cover LP, and for a coupled job a coarse frontier bound from a few slopes, in a few
array passes over all domains at once (``grouped_cover_bounds``); the full frontier bound
only for the domains the search reaches (a domain is solved once its refined bound is the
least left). The other strategies rank by a pair
(interruptions or the largest spot pool, then price) and solve every domain. Ties go to the
domain whose name sorts first.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fleet.planning import economics
from fleet.planning.candidates import Candidates
from fleet.spec import FleetSpec, Strategy, Workload, WorkloadKind

#: Provider features that keep a zone-level coupled job on a low-latency interconnect.
INTERCONNECT = {
    "aws": "AWS cluster placement group (strategy cluster)",
    "gcp": "GCP compact placement policy",
    "azure": "Azure proximity placement group",
}
METRIC = {
    Strategy.PRICE_CAPACITY_OPTIMIZED: "true cost $/h",
    Strategy.LOWEST_PRICE: "$/h",
    Strategy.CAPACITY_OPTIMIZED: "interruptions/h",
    Strategy.DIVERSIFIED: "largest spot pool (weighted GPUs)",
}
#: Lambda multipliers (hours, times the domain's cheapest price) of the frontier bound.
FRONTIER_SLOPES = (0.01, 0.03, 0.06, 0.1, 0.15, 0.22, 0.3, 0.45, 0.7, 1.0, 1.6, 2.5)
FRONTIER_POINTS = 96
#: The few slopes of the first, all-domains-at-once frontier bound (``Bounds``).
COARSE_SLOPES = (0.03, 0.1, 0.3, 1.0)
_REL = 1e-9


@dataclass
class Solved:
    """One domain's (or the whole catalog's) plan: the pools it was solved over, counts per
    pool (a partial plan when ``shortfall``), the strategy's value (a tuple, smaller is
    better; ``None`` when the cutoff ruled it out), notes and extra exclusions."""

    cand: Candidates
    counts: np.ndarray
    shortfall: str
    notes: list[str]
    exclusions: list
    value: tuple[float, ...] | None


@dataclass
class Choice:
    solved: Solved
    level: str
    domain: str
    domains: int
    tried: int
    runner_up: str = ""
    runner_up_value: tuple[float, ...] | None = None
    outside: int = 0  # allowed pools outside the chosen domain


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


def value_of(
    spec: FleetSpec, cand: Candidates, counts: np.ndarray, churn: float, independent_cost: np.ndarray
) -> tuple[float, ...]:
    """The strategy's objective of ``counts`` as a tuple (smaller is better), with a re-plan's
    launch penalty ``churn`` on new launches."""
    new = np.maximum(counts - cand.current, 0)
    price = float(cand.price @ counts) + churn * float(cand.price @ new)
    strategy = spec.strategy
    if strategy is Strategy.LOWEST_PRICE:
        return (price,)
    if strategy is Strategy.PRICE_CAPACITY_OPTIMIZED:
        if spec.workload.kind is WorkloadKind.COUPLED:
            return (price * economics.overhead_factor(float(cand.rate @ counts), spec.workload),)
        return (float(independent_cost @ counts) + churn * float(independent_cost @ new),)
    if strategy is Strategy.CAPACITY_OPTIMIZED:
        return (round(float(cand.rate @ counts), 9), price)
    spot_load = cand.weighted * counts * cand.spot
    return (round(float(spot_load.max(initial=0.0)), 9), price)


def node_costs(spec: FleetSpec, cand: Candidates) -> np.ndarray | None:
    """Per node, what the cover bound charges (``None``: the strategy has no such bound)."""
    if spec.strategy is Strategy.LOWEST_PRICE:
        return cand.price
    if spec.strategy is Strategy.PRICE_CAPACITY_OPTIMIZED:
        # F by numpy (within a few ulps of overhead_factor), less a hair: a bound for every domain
        return cand.price * economics.overhead_factors(cand.rate, spec.workload) * (1 - 1e-12)
    return None


def independent_costs(cand: Candidates, workload: Workload) -> np.ndarray:
    """``p_i * F(lam_i)`` per pool (F computed once per distinct rate)."""
    rates, inverse = np.unique(cand.rate, return_inverse=True)
    factors = np.array([economics.overhead_factor(float(r), workload) for r in rates])
    return cand.price * factors[inverse.reshape(-1)]


def cover_bound(
    cost: np.ndarray,
    weighted: np.ndarray,
    spot: np.ndarray,
    upper: np.ndarray,
    target: float,
    baseline: float,
    spread: Spread | None = None,
) -> float:
    """``min cost.x`` s.t. ``weighted.x >= target``, on-demand ``weighted.x >= baseline``,
    ``0 <= x <= upper`` and, with ``spread``, the spot weighted GPUs of each of its groups at
    most its cap (x real): inf when even that is infeasible.

    Greedy and exact: in an optimum the on-demand part is the cheapest-first fill (by cost
    per weighted GPU) of its amount ``A`` and the spot part the cheapest-first fill of
    ``target - A`` within the group caps (the groups are disjoint, so each group gives its
    cheapest first up to its cap); the cost is convex in ``A >= baseline``, minimal where the
    marginal ratios meet, which is where filling ``baseline`` from on-demand and then the rest
    cheapest-first from everything left ends."""
    ratio = cost / weighted
    room = weighted * upper
    od = np.flatnonzero(~spot)
    total = 0.0
    left = room.copy()
    if baseline > 0:
        order = od[np.argsort(ratio[od], kind="stable")]
        filled = _fill(room[order], baseline)
        if filled is None:
            return np.inf
        total += float(ratio[order] @ filled)
        left[order] -= filled
    rest = target - baseline
    if rest > 0:
        if spread is not None:
            left = spread.capped(left, ratio, spot)
        order = np.argsort(ratio, kind="stable")
        filled = _fill(left[order], rest)
        if filled is None:
            return np.inf
        total += float(ratio[order] @ filled)
    return total


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

    def capped(self, room: np.ndarray, ratio: np.ndarray, spot: np.ndarray) -> np.ndarray:
        """Per pool, what a cheapest-first fill within the group caps can take from it."""
        pools = np.flatnonzero(spot & (self.group >= 0))
        if not len(pools):
            return room
        order = pools[np.lexsort((ratio[pools], self.group[pools]))]
        g = self.group[order]
        cum = np.cumsum(room[order])
        starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        base = np.repeat(np.r_[0.0, cum][starts], np.diff(np.r_[starts, len(order)]))
        before = cum - room[order] - base
        out = room.copy()
        out[order] = np.clip(self.cap - before, 0.0, room[order])
        return out


def _fill(room: np.ndarray, need: float) -> np.ndarray | None:
    """Amounts taken from ``room`` in order until ``need`` is met (``None``: not enough)."""
    before = np.concatenate([[0.0], np.cumsum(room)[:-1]])
    if not len(room) or before[-1] + room[-1] < need - 1e-9:
        return None
    return np.clip(need - before, 0.0, room)


def _frontier_bound(
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
    shift = nu @ quotas.units if nu is not None and len(nu) else np.zeros(len(pools))
    fixed = float(nu @ quotas.headroom) if nu is not None and len(nu) else 0.0

    def g(mu: float) -> float:
        # the multipliers were searched for the independent costs; at these costs they may be
        # worse than none, and both give a bound
        plain = cover_bound(price + mu * rate, w, s, u, target, baseline, spread)
        if not fixed and not shift.any():
            return plain
        return max(plain, cover_bound(price + mu * rate + shift, w, s, u, target, baseline, spread) - fixed)

    g0 = g(0.0)
    if not np.isfinite(g0):
        return np.inf
    g0 = max(g0, 1e-12)
    mus = g0 * np.array(FRONTIER_SLOPES)
    gs = np.array([g(float(mu)) for mu in mus])
    return max(float(frontier(np.array([g0]), mus[None, :], gs[None, :], spec.workload)[0]), floor)


def frontier(g0: np.ndarray, mus: np.ndarray, gs: np.ndarray, workload: Workload) -> np.ndarray:
    """Per row (a domain), the bound ``_frontier_bound`` derives from ``g(0) = g0`` and
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
) -> tuple[float, np.ndarray]:
    """``cover_bound`` with the quota rows ``units @ x <= headroom`` added: the LP itself,
    solved by HiGHS (``inf`` when it is infeasible: no plan in these pools meets the spec
    within the quotas). Returns the bound and multipliers ``nu >= 0`` for the quotas (the LP's
    duals): by Lagrangian duality ``cover_bound(c + nu @ units) - nu @ headroom`` is a lower
    bound for any costs ``c`` and any such ``nu``, which ``_frontier_bound`` uses. Without
    quotas this is ``cover_bound`` (greedy, no solver)."""
    if not len(quotas.headroom):
        return cover_bound(cost, weighted, spot, upper, target, baseline, spread), np.zeros(0)
    from fleet.planning.highs import Program, solve_lp

    n = len(cost)
    rows = [(np.arange(n), weighted, target, np.inf)]
    od = np.flatnonzero(~spot)
    if baseline > 0:
        rows.append((od, weighted[od], baseline, np.inf))
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
    return max(z, cover_bound(cost, weighted, spot, upper, target, baseline, spread)), nu


def lower_bounds(
    spec: FleetSpec,
    cand: Candidates,
    members: list[np.ndarray],
    quotas: QuotaRows = NO_QUOTAS,
    spread: Spread | None = None,
) -> np.ndarray:
    """Per domain (its pools in ``members``), a value no plan in it beats (``-inf``: no bound
    for this strategy; ``inf``: no plan covers the target there). See the module docstring;
    ``quotas`` and a cap ``spread`` over finer domains tighten the bounds. ``Bounds`` gives the
    same values lazily (``first`` for every domain, ``refine`` per domain)."""
    bounds = Bounds(spec, cand, members, quotas, spread)
    return np.array([bounds.refine(d) for d in range(len(members))])


class Bounds:
    """``lower_bounds`` in two steps: ``first`` (every domain at once: the cover LP priced at
    ``node_costs``) and ``refine(d)`` (a coupled job's frontier bound, ``_frontier_bound``, at
    least ``first[d]``; other strategies: ``first[d]``), so a search refines only the domains
    it reaches."""

    def __init__(
        self,
        spec: FleetSpec,
        cand: Candidates,
        members: list[np.ndarray],
        quotas: QuotaRows = NO_QUOTAS,
        spread: Spread | None = None,
    ):
        self.spec, self.cand, self.members, self.quotas, self.spread = spec, cand, members, quotas, spread
        cost = node_costs(spec, cand)
        self.coupled = spec.strategy is Strategy.PRICE_CAPACITY_OPTIMIZED and spec.workload.kind is WorkloadKind.COUPLED
        self.nu: list[np.ndarray] = [np.zeros(0)] * len(members)
        if cost is None:
            self.first = np.full(len(members), -np.inf)
            return
        target, baseline = float(spec.capacity.gpus), float(spec.capacity.on_demand_gpus)
        if not len(quotas.headroom) and spread is None:
            self.first = grouped_cover_bounds(cost, cand.weighted, cand.spot, cand.upper, target, baseline, members)
            if self.coupled:
                self.first = np.maximum(self.first, self._coarse_frontier(target, baseline))
            return
        self.first = np.empty(len(members))
        for d, m in enumerate(members):
            self.first[d], self.nu[d] = priced_bound(
                cost[m],
                cand.weighted[m],
                cand.spot[m],
                cand.upper[m],
                target,
                baseline,
                self._quotas(d),
                self._spread(d),
            )

    def _coarse_frontier(self, target: float, baseline: float) -> np.ndarray:
        """``_frontier_bound`` of every domain at once from a few of its slopes
        (``COARSE_SLOPES``): weaker, valid, and one grouped fill per slope."""
        cand, members = self.cand, self.members
        g0 = grouped_cover_bounds(cand.price, cand.weighted, cand.spot, cand.upper, target, baseline, members)
        out = np.full(len(members), np.inf)
        ok = np.flatnonzero(np.isfinite(g0))
        if not len(ok):
            return out
        g0 = np.maximum(g0, 1e-12)
        # one slope per grouped fill: mu is a multiple of each domain's g0, so the costs differ per
        # domain (0 for a domain that cannot cover: its bound stays inf whatever it is priced at)
        scale = np.repeat(np.where(np.isfinite(g0), g0, 0.0), [len(m) for m in members])
        pools = np.concatenate(members)
        gs = np.empty((len(members), len(COARSE_SLOPES)))
        for k, slope in enumerate(COARSE_SLOPES):
            cost = np.zeros(len(cand))
            cost[pools] = cand.price[pools] + slope * scale * cand.rate[pools]
            gs[:, k] = grouped_cover_bounds(cost, cand.weighted, cand.spot, cand.upper, target, baseline, members)
        mus = g0[:, None] * np.array(COARSE_SLOPES)[None, :]
        out[ok] = frontier(g0[ok], mus[ok], gs[ok], self.spec.workload)
        return out

    def _quotas(self, d: int) -> QuotaRows:
        return self.quotas.of(self.members[d]) if len(self.quotas.headroom) else NO_QUOTAS

    def _spread(self, d: int) -> Spread | None:
        return self.spread.of(self.members[d]) if self.spread is not None else None

    def refine(self, d: int) -> float:
        bound = float(self.first[d])
        if not self.coupled or not np.isfinite(bound):
            return bound
        return _frontier_bound(
            self.spec, self.cand, self.members[d], bound, self._quotas(d), self.nu[d], self._spread(d)
        )


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


def domains_of(cand: Candidates, level: str) -> tuple[list[np.ndarray], list[str]]:
    """The pools of each domain of ``level`` present in ``cand`` (ascending indices) and the
    domains' names (``provider``, ``provider/region``, ``provider/region/zone``)."""
    labels = cand.labels()
    codes, names = labels.codes(level), labels.names(level)
    order = np.argsort(codes, kind="stable")
    present, starts = np.unique(codes[order], return_index=True)
    members = np.split(order, starts[1:])
    return members, [str(names[c]) for c in present]


def choose(
    spec: FleetSpec,
    cand: Candidates,
    level: str,
    solve: Callable[[Candidates, tuple[float, ...] | None, bool], Solved],
    quotas: QuotaRows = NO_QUOTAS,
    spread: Spread | None = None,
) -> Choice:
    """The best domain of ``level`` and the runner-up, exactly (module docstring).

    ``solve(sub, cutoff, partial)`` plans over the pools ``sub`` of one domain and may return a
    value of ``None`` when no plan there is worth less than ``cutoff`` or, without ``partial``,
    none meets the spec. When no domain can meet the spec, the partial plan of the domain that
    can hold the most weighted GPUs is returned. ``quotas`` and ``spread`` tighten the bounds."""
    members, names = domains_of(cand, level)
    bounds = Bounds(spec, cand, members, quotas, spread)
    queue = [(float(bounds.first[d]), names[d], d, False) for d in range(len(members))]
    heapq.heapify(queue)
    top: list[tuple[tuple[float, ...], str, int, Solved]] = []
    tried = 0
    while queue:
        bound, _, d, refined = heapq.heappop(queue)
        if not np.isfinite(bound) and bound > 0:
            break  # this and every later domain cannot cover
        if len(top) == 2 and bound > top[1][0][0] * (1 + _REL) + _REL:
            break
        if not refined and bounds.coupled:  # the tighter bound, only where the search reaches
            heapq.heappush(queue, (max(bounds.refine(d), bound), names[d], d, True))
            continue
        tried += 1
        cutoff = top[1][0] if len(top) == 2 else None
        sol = solve(cand.subset(members[d]), cutoff, False)
        if sol.shortfall or sol.value is None:
            continue
        top = sorted(top + [(sol.value, names[d], d, sol)], key=lambda t: (t[0], t[1]))[:2]
    if not top:
        d = _roomiest(spec, cand, members, names)
        sol = solve(cand.subset(members[d]), None, True)
        sol.shortfall = (
            f"no single {level} can meet the spec (placement {level}); in the {level} that holds "
            f"the most, {names[d]}: {sol.shortfall}"
        )
        return Choice(sol, level, names[d], len(members), tried, outside=len(cand) - len(members[d]))
    _, name, d, sol = top[0]
    runner = top[1] if len(top) > 1 else None
    return Choice(
        sol,
        level,
        name,
        len(members),
        tried,
        runner_up=runner[1] if runner else "",
        runner_up_value=runner[0] if runner else None,
        outside=len(cand) - len(members[d]),
    )


def _roomiest(spec: FleetSpec, cand: Candidates, members: list[np.ndarray], names: list[str]) -> int:
    """The domain whose pools can hold the most weighted GPUs (up to the target), first by name."""
    target = float(spec.capacity.gpus)
    held = [
        min(float(np.sum(cand.weighted[m] * np.minimum(cand.upper[m], target / cand.weighted[m] + 1))), target)
        for m in members
    ]
    return min(range(len(members)), key=lambda d: (-held[d], names[d]))
