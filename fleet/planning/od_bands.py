"""A coupled job's lower bound in one domain, taken per band of the plan's on-demand part.

The share caps (``fleet.planning.domains``) are ``max(s * (T - OD), c)``: they shrink as the
plan's on-demand weighted GPUs ``OD`` grow. A relaxation at the baseline (``OD = B``) gives
every spot pool and zone its loosest cap, while the plans that win a coupled job often hold
most of the target on demand (on-demand never interrupts, which keeps ``Lam`` and so
``F(Lam)`` low) and must then spread a small spot part over many pools under tight caps. So
the plans with ``OD`` in a band ``[lo, hi]`` are bounded apart. In such a plan

* every pool and finer-domain cap is at most ``max(s * (T - lo), c)``, so a spot pool of
  ``w`` weighted GPUs per node holds at most ``floor(cap / w)`` nodes (the rows are on whole
  nodes);
* the on-demand part is at least ``lo`` and at most ``hi``;

and the frontier bound (``relaxation.frontier_bound``) of that band's relaxation bounds its
value. Plans with ``OD >= T + w_od`` (``w_od`` the largest on-demand node) need no band:
removing an on-demand node keeps the cover, loosens every cap and quota, and lowers ``P``
without raising ``Lam``, so some optimal plan has ``OD < T + w_od`` (the same argument as
the domains' ``M1``). The domain's bound is the least band bound, never below the caller's
``floor``. Bands are split where the bound is least (a band's bound never falls when it is
split: tighter caps, a narrower range) until the least is at least ``enough`` (the value a
domain must beat to matter: nothing more is needed), a band is narrower than ``MIN_WIDTH``
weighted GPUs, or there are ``MAX_BANDS``.

Quotas enter each band with the multipliers of that band's own LP (``priced_bound`` at
``mu = 0``), whose value is also the band's ``g(0)``; any multipliers ``>= 0`` keep ``g`` a
lower bound (Lagrangian duality), these make it tight at ``mu = 0``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from fleet.planning.relaxation import FRONTIER_SLOPES, QuotaRows, Spread, frontier, priced_bound, priced_covers
from fleet.spec import Workload

FIRST_BANDS = 2
MAX_BANDS = 6
MIN_WIDTH = 0.5


@dataclass(frozen=True)
class Shares:
    """The share rule of the caps a band tightens: ``pool`` (every plan has one), the finer
    domain's share when its cap moves with ``OD`` (``None``: ``Spread.cap`` is fixed) and
    ``floor``, ``c``: the smallest spot node on offer."""

    pool: float
    spread: float | None
    floor: float

    def cap(self, share: float, target: float, on_demand: float) -> float:
        return max(share * (target - on_demand), self.floor)


@dataclass(frozen=True)
class Domain:
    """One domain's pools, as the relaxations read them."""

    price: np.ndarray
    rate: np.ndarray
    weighted: np.ndarray
    spot: np.ndarray
    upper: np.ndarray
    quotas: QuotaRows
    spread: Spread | None


def bound(
    domain: Domain,
    target: float,
    baseline: float,
    shares: Shares,
    workload: Workload,
    floor: float = -np.inf,
    enough: float = np.inf,
) -> float:
    """The least band bound over ``[baseline, target + w_od)`` (module docstring); ``inf``
    when no band can hold a plan."""
    od_nodes = domain.weighted[~domain.spot]
    if not len(od_nodes):
        top = baseline  # no on-demand pool: OD is 0, one band (the baseline must be 0 to cover)
    else:
        top = target + float(od_nodes.max())
    if top <= baseline:
        return max(_band(domain, target, baseline, baseline, shares, workload), floor)
    edges = np.linspace(baseline, top, FIRST_BANDS + 1)
    heap = [(_band(domain, target, lo, hi, shares, workload), lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]
    heapq.heapify(heap)
    while len(heap) < MAX_BANDS:
        least, lo, hi = heap[0]
        if least >= enough or not np.isfinite(least) or hi - lo < 2 * MIN_WIDTH:
            break
        heapq.heappop(heap)
        mid = (lo + hi) / 2
        for a, b in ((lo, mid), (mid, hi)):
            # a part's bound is at least its whole's: tighter caps, a narrower range
            heapq.heappush(heap, (max(_band(domain, target, a, b, shares, workload), least), a, b))
    return max(heap[0][0], floor)


def _band(domain: Domain, target: float, lo: float, hi: float, shares: Shares, workload: Workload) -> float:
    """The frontier bound of plans whose on-demand part is in ``[lo, hi]``."""
    w, spot = domain.weighted, domain.spot
    pool_cap = shares.cap(shares.pool, target, lo)
    upper = np.where(spot, np.minimum(domain.upper, np.floor(pool_cap / w + 1e-9)), domain.upper)
    spread = domain.spread
    if spread is not None and shares.spread is not None:
        spread = Spread(spread.group, shares.cap(shares.spread, target, lo))
    z0, nu = priced_bound(domain.price, w, spot, upper, target, lo, domain.quotas, spread, hi)
    if not np.isfinite(z0):
        return np.inf
    g0 = max(z0, 1e-12)  # the band's LP at mu = 0; its multipliers make g tight there
    mus = g0 * np.array(FRONTIER_SLOPES)
    gs = priced_covers(
        domain.price, domain.rate, mus, w, spot, upper, target, lo, spread, hi, quotas=domain.quotas, nu=nu
    )
    return float(frontier(np.array([g0]), mus[None, :], gs[None, :], workload)[0])
