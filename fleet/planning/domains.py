"""Failure-domain caps and account quotas: the rows they add to the planner's MILP.

**Share rule.** Every diversification cap (``max_pool_share``, ``max_zone_share``,
``max_region_share``, ``max_provider_share``) is a share ``s`` of the plan's *spot part*:
the target ``T`` minus the on-demand weighted GPUs ``OD`` the plan holds (not minus the
baseline), and never less than ``c``, the smallest spot node on offer. So a domain ``D``
of a capped level holds at most ``max(s * (T - OD), c)`` spot weighted GPUs. Buying
on-demand past the baseline shrinks the spot part and every cap with it; buying more spot
never loosens a cap. A zone is ``provider/region/zone`` (the region where a provider has
no zones). Share 1 turns the zone, region and provider caps off; the pool cap always
applies.

**Rows.** With ``L(D)`` the spot weighted GPUs in ``D``: when ``s * (T - B) <= c`` (``B``
the baseline; ``OD >= B``) the cap is the constant ``c``: ``L(D) <= c``. Otherwise one
binary ``u`` per level picks the term of the max: ``L(D) + s * OD - M1 * u <= s * T`` and
``L(D) + M2 * u <= c + M2`` with ``M1 = c + s * w_od`` (``w_od`` the largest on-demand node)
and ``M2 = s * T - c``. ``M1`` holds for plans with ``OD < T + w_od``, and some optimal
plan is one: among optimal plans one with the fewest nodes needs each on-demand node for a
covering row (removing a node only loosens every cap and quota and never raises an
objective). Per-pool caps are first the column bounds ``max(s * (T - B), c) / w`` (valid as
``OD >= B``); pool and domain rows are added lazily (``Domains.activate``): solve, add the
rows of the caps the plan breaks, solve again. Adding valid rows only tightens the
relaxation, so the first plan that breaks none is optimal.

**Quotas.** ``Quota`` rows: the units (GPUs or vCPUs per node) of the pools a quota covers
sum to at most its headroom ``limit - in_use + units running in this fleet now`` (never
below 0). They are few and always present.

**What pruning may assume.** Two pools are interchangeable in every row only if they
share the finest capped domain and the same quotas (with equal units per node):
``Domains.group`` numbers those classes, and dominance pruning and twin merging work
within a class (``fleet.planning.pruning`` states the proof).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from fleet.model import Market, Offer, Quota

#: Capped levels from finest to coarsest, with the spec field that sets each share.
LEVELS = ("pool", "zone", "region", "provider")
FIELD = {level: f"max_{level}_share" for level in LEVELS}
TOL = 1e-6


def domain_name(offer: Offer, level: str) -> str:
    """The failure domain of ``offer`` at ``level``: a pool id, ``provider/region/zone``,
    ``provider/region`` or ``provider``."""
    p = offer.pool
    if level == "pool":
        return p.id
    if level == "zone":
        return f"{p.provider}/{p.region}/{p.zone or '-'}"
    return f"{p.provider}/{p.region}" if level == "region" else p.provider


@dataclass(frozen=True)
class Limits:
    """The caps and quotas of one plan, independent of which pools a model holds.

    ``target`` and ``baseline`` are the spec's (the spot part is measured against them
    whatever a partial-plan stage covers); ``shares`` maps each capped level to its share
    (the pool level always, the others only below 1); ``floor`` is ``c``, the smallest spot
    node on offer.
    """

    target: float
    baseline: float
    shares: tuple[tuple[str, float], ...]
    floor: float
    quotas: tuple[Quota, ...] = ()

    def share(self, level: str) -> float | None:
        return dict(self.shares).get(level)

    def without(self, level: str | None = None, quotas: bool = False) -> "Limits":
        """These limits with one cap level (the pool cap: only its rows; bounds stay with the
        candidates) or the quotas dropped: for finding which limit binds."""
        shares = tuple((lv, s) for lv, s in self.shares if lv != level)
        return replace(self, shares=shares, quotas=() if quotas else self.quotas)

    def fixed(self, share: float) -> bool:
        """Whether a cap of ``share`` is the constant floor ``c`` for every plan."""
        return share * (self.target - self.baseline) <= self.floor + TOL

    def cap(self, share: float, on_demand: float) -> float:
        """The weighted GPUs one domain may hold when the plan holds ``on_demand`` on-demand."""
        return max(share * (self.target - on_demand), self.floor)


def limits_for(spec, cand_spot_weights: np.ndarray, quotas=()) -> Limits:
    """``Limits`` of ``spec``: its shares, ``c`` from the allowed spot nodes' weights."""
    d = spec.diversification
    target, baseline = float(spec.capacity.gpus), float(spec.capacity.on_demand_gpus)
    shares = [("pool", d.max_pool_share)] + [(lv, getattr(d, FIELD[lv])) for lv in LEVELS[1:]
                                             if getattr(d, FIELD[lv]) < 1]
    floor = float(np.min(cand_spot_weights)) if len(cand_spot_weights) else 0.0
    return Limits(target, baseline, tuple(shares), floor, tuple(quotas))


@dataclass
class Domains:
    """``Limits`` bound to one set of candidate pools (see the module docstring).

    ``keys[level]`` numbers each spot pool's domain (-1 for on-demand); ``active`` holds the
    (level, domain) rows added so far; ``quota_units[q]`` is each pool's use of quota ``q``
    (0 where it does not apply) and ``headroom[q]`` what the fleet may hold of it.
    """

    limits: Limits
    weighted: np.ndarray
    spot: np.ndarray
    keys: dict[str, np.ndarray]
    names: dict[str, list[str]]
    quota_units: np.ndarray           # (quotas, pools)
    headroom: np.ndarray
    group: np.ndarray                 # pools in one class share every domain row and quota
    od_node: float                    # largest on-demand node (weighted)
    active: set[tuple[str, int]] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def bind(cls, limits: Limits, offers: list[Offer], weighted: np.ndarray, spot: np.ndarray,
             current: np.ndarray) -> "Domains":
        n = len(offers)
        keys, names = {}, {}
        for level, _ in limits.shares:
            if level == "pool":
                keys[level] = np.where(spot, np.arange(n), -1)
                names[level] = [o.pool.id for o in offers]
                continue
            labels = np.array([domain_name(o, level) for o in offers], dtype=object)
            uniq, inverse = np.unique(labels, return_inverse=True) if n else (np.zeros(0), np.zeros(0, int))
            keys[level] = np.where(spot, inverse.reshape(-1), -1)
            names[level] = list(uniq)
        units = np.zeros((len(limits.quotas), n))
        notes = []
        for q, quota in enumerate(limits.quotas):
            unknown = 0
            for i, o in enumerate(offers):
                if quota.covers(o):
                    u = quota.units(o)
                    unknown += u is None
                    units[q, i] = u or 0.0
            if unknown:
                notes.append(f"quota {quota.label} counts vCPUs but {unknown} offer(s) it covers give none; "
                             "they are planned without it")
        headroom = np.maximum(np.array([q.limit - q.in_use for q in limits.quotas]) + units @ current, 0.0)
        coarse = [lv for lv in LEVELS[1:] if lv in keys]
        finest = keys[coarse[0]] if coarse else np.zeros(n, np.int64)
        group_cols = np.vstack([np.where(spot, finest, -1)[None, :], units]) if n else np.zeros((1, 0))
        _, group = np.unique(group_cols.T, axis=0, return_inverse=True) if n else (None, np.zeros(0, np.int64))
        od = weighted[~spot]
        return cls(limits, weighted, spot, keys, names, units, headroom, group.reshape(-1).astype(np.int64),
                   float(od.max()) if len(od) else 0.0, notes=notes)

    def loads(self, level: str, counts: np.ndarray) -> np.ndarray:
        """Spot weighted GPUs per domain of ``level`` under ``counts``."""
        key = self.keys[level]
        spot = key >= 0
        return np.bincount(key[spot], weights=(self.weighted * counts)[spot], minlength=len(self.names[level]))

    def on_demand(self, counts: np.ndarray) -> float:
        return float(self.weighted[~self.spot] @ counts[~self.spot])

    def broken(self, counts: np.ndarray) -> list[tuple[str, int]]:
        """The (level, domain) caps ``counts`` exceeds."""
        od = self.on_demand(counts)
        out = []
        for level, share in self.limits.shares:
            over = np.flatnonzero(self.loads(level, counts) > self.limits.cap(share, od) + TOL)
            out += [(level, int(d)) for d in over]
        return out

    def quotas_ok(self, counts: np.ndarray) -> bool:
        return bool((self.quota_units @ counts <= self.headroom + TOL).all())

    def activate(self, counts: np.ndarray) -> bool:
        """Add the rows of every cap ``counts`` breaks; whether any was new."""
        new = set(self.broken(counts)) - self.active
        self.active |= new
        return bool(new)

    def pools_with_rows(self) -> np.ndarray:
        """Pools with a pool-level row of their own (they may not share a twin column)."""
        return np.array(sorted(d for lv, d in self.active if lv == "pool"), np.int64)

    def binding(self, counts: np.ndarray) -> list[str]:
        """One note per cap level or quota that is at its limit in ``counts``."""
        od = self.on_demand(counts)
        notes = []
        for level, share in self.limits.shares:
            if level == "pool":
                continue
            loads = self.loads(level, counts)
            cap = self.limits.cap(share, od)
            full = np.flatnonzero((loads >= cap - TOL) & (loads > 0))
            if len(full):
                d = int(full[0])
                notes.append(f"{FIELD[level]} {share:g} binds in {len(full)} {level}(s) "
                             f"(e.g. {self.names[level][d]} holds {loads[d]:g} of {cap:g} weighted GPUs)")
        used = self.quota_units @ counts
        for q, quota in enumerate(self.limits.quotas):
            if used[q] > 0 and used[q] >= self.headroom[q] - TOL:
                notes.append(f"quota {quota.label} binds: the plan uses {used[q]:g} of the "
                             f"{self.headroom[q]:g} this fleet may hold")
        return notes

    def rows(self, column_row, view_weighted: np.ndarray, od_cols: np.ndarray, binary_of) -> list:
        """The quota rows and the active cap rows as ``(cols, coefs, lb, ub)`` over model
        columns. ``column_row(pools, coefs)`` maps pools to columns; ``binary_of(level)`` gives
        the column of a level's binary ``u``."""
        from fleet.planning.milp import Row   # milp imports this module
        lim = self.limits
        out = []
        for q in range(len(lim.quotas)):
            pools = np.flatnonzero(self.quota_units[q])
            if len(pools):
                cols, coefs = column_row(pools, self.quota_units[q, pools])
                out.append(Row(cols, coefs, ub=float(self.headroom[q]) + TOL))
        shares = dict(lim.shares)
        for level, d in sorted(self.active):
            share = shares[level]
            pools = np.flatnonzero(self.keys[level] == d)
            cols, coefs = column_row(pools, self.weighted[pools])
            if lim.fixed(share):
                out.append(Row(cols, coefs, ub=lim.floor + TOL))
                continue
            u = binary_of(level)
            m1, m2 = lim.floor + share * self.od_node, share * lim.target - lim.floor
            out.append(Row(np.concatenate([cols, od_cols, [u]]),
                           np.concatenate([coefs, share * view_weighted[od_cols], [-m1]]),
                           ub=share * lim.target + TOL))
            out.append(Row(np.append(cols, u), np.append(coefs, m2), ub=lim.floor + m2 + TOL))
        return out

    def binary_levels(self) -> list[str]:
        """Levels whose active rows need the binary ``u`` (in a fixed order)."""
        shares = dict(self.limits.shares)
        return sorted({lv for lv, _ in self.active if not self.limits.fixed(shares[lv])}, key=LEVELS.index)


def spot_weights(offers: list[Offer], weights: dict[str, float]) -> np.ndarray:
    """Weighted GPUs per node of the spot offers in ``offers``."""
    return np.array([o.gpus * weights[o.accelerator] for o in offers if o.pool.market is Market.SPOT], float)
