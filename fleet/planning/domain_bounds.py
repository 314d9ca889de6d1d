"""Per placement domain, a value no plan in it can beat (``fleet.planning.placement``).

The bound is the fractional cover (the LP of weighted GPUs >= target and on-demand >=
baseline within the pools' bounds, solved greedily by cost per weighted GPU,
``fleet.planning.relaxation``) priced at ``p * F(lam)`` per node for
``price-capacity-optimized`` and at ``p`` for ``lowest-price``. For independent nodes that
is the objective's own LP relaxation. For a coupled job, ``P * F(Lam) = sum(n_i p_i F(Lam)) >=
sum(n_i p_i F(lam_i))`` since ``Lam >= lam_i`` for every pool in use (``n_i >= 1``) and ``F``
increases; a coupled job's domains then get a tighter bound from the (price, rate) frontier
of the same LP (``relaxation.frontier_bound``). Quotas enter the LP as rows
(``relaxation.priced_bound``, solved by HiGHS; their duals price them in the frontier) and the
cap of the finest failure domain left below the placement level as a disjoint capacity per
group (``Spread``); both only add valid rows, so the bounds stay bounds.

The bounds come in two steps (``Bounds``): every domain's cover LP, and for a coupled job a
coarse frontier bound from a few slopes, in a few array passes over all domains at once
(``relaxation.grouped_cover_bounds``); the full frontier bound only for the domains the search
reaches. Where caps or quotas bind, the full bound is taken per band of the plan's on-demand
part (``fleet.planning.od_bands``): the share caps shrink as on-demand grows, which a single
relaxation at the baseline cannot see.
"""

from __future__ import annotations

import numpy as np

from fleet.planning import economics, od_bands
from fleet.planning.candidates import Candidates
from fleet.planning.relaxation import (
    NO_QUOTAS,
    QuotaRows,
    Spread,
    frontier,
    frontier_bound,
    grouped_cover_bounds,
    priced_bound,
)
from fleet.spec import FleetSpec, Strategy, WorkloadKind

#: The few slopes of the first, all-domains-at-once frontier bound (``Bounds``).
COARSE_SLOPES = (0.03, 0.1, 0.3, 1.0)


def node_costs(spec: FleetSpec, cand: Candidates) -> np.ndarray | None:
    """Per node, what the cover bound charges (``None``: the strategy has no such bound)."""
    if spec.strategy is Strategy.LOWEST_PRICE:
        return cand.price
    if spec.strategy is Strategy.PRICE_CAPACITY_OPTIMIZED:
        # F by numpy (within a few ulps of overhead_factor), less a hair: a bound for every domain
        return cand.price * economics.overhead_factors(cand.rate, spec.workload) * (1 - 1e-12)
    return None


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
    ``node_costs``) and ``refine(d)`` (a coupled job's frontier bound, ``frontier_bound``, at
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
        """``frontier_bound`` of every domain at once from a few of its slopes
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

    def _banded(self, d: int, floor: float, enough: float) -> float:
        spec, cand, m = self.spec, self.cand, self.members[d]
        spread = self._spread(d)
        smallest = float(np.min(cand.weighted[cand.spot])) if cand.spot.any() else 0.0
        shares = od_bands.Shares(
            spec.diversification.max_pool_share,
            spread.share[0] if spread is not None and spread.share is not None else None,
            smallest,
        )
        domain = od_bands.Domain(
            cand.price[m],
            cand.rate[m],
            cand.weighted[m],
            cand.spot[m],
            cand.upper[m],
            self._quotas(d),
            spread,
        )
        target, baseline = float(spec.capacity.gpus), float(spec.capacity.on_demand_gpus)
        return od_bands.bound(domain, target, baseline, shares, spec.workload, floor, enough)

    def _quotas(self, d: int) -> QuotaRows:
        return self.quotas.of(self.members[d]) if len(self.quotas.headroom) else NO_QUOTAS

    def _spread(self, d: int) -> Spread | None:
        return self.spread.of(self.members[d]) if self.spread is not None else None

    def refine(self, d: int, enough: float = np.inf) -> float:
        """Domain ``d``'s tighter bound; where caps or quotas apply, taken per band of the
        on-demand part (``od_bands``) only until it reaches ``enough``."""
        bound = float(self.first[d])
        if not self.coupled or not np.isfinite(bound):
            return bound
        if len(self.quotas.headroom) or self.spread is not None:
            return self._banded(d, bound, enough)
        return frontier_bound(
            self.spec, self.cand, self.members[d], bound, self._quotas(d), self.nu[d], self._spread(d)
        )
