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
from fnmatch import fnmatchcase

import numpy as np

from fleet.model import Offer, Quota, QuotaUnit

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

    def without(self, level: str | None = None, quotas: bool = False) -> Limits:
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
    shares = [("pool", d.max_pool_share)] + [
        (lv, getattr(d, FIELD[lv])) for lv in LEVELS[1:] if getattr(d, FIELD[lv]) < 1
    ]
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
    names: dict[str, _PoolIds | np.ndarray]  # level -> name by code (pool ids built on demand)
    quota_units: np.ndarray  # (quotas, pools)
    headroom: np.ndarray
    group: np.ndarray  # pools in one class share every domain row and quota
    od_node: float  # largest on-demand node (weighted)
    active: set[tuple[str, int]] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def bind(cls, limits: Limits, cand) -> Domains:
        """``limits`` over the pools of ``cand`` (``fleet.planning.candidates.Candidates``)."""
        labels = cand.labels()
        n, spot, weighted = len(cand), cand.spot, cand.weighted
        keys: dict[str, np.ndarray] = {}
        names: dict[str, _PoolIds | np.ndarray] = {}
        for level, _ in limits.shares:
            if level == "pool":
                keys[level] = np.where(spot, np.arange(n), -1)
                names[level] = _PoolIds(cand.offers)
            else:
                keys[level] = np.where(spot, labels.codes(level), -1)
                names[level] = labels.names(level)
        units = np.zeros((len(limits.quotas), n))
        notes = []
        per_unit: dict[QuotaUnit, np.ndarray] = {}
        for q, quota in enumerate(limits.quotas):
            covered = _covered(labels, quota)
            if quota.unit not in per_unit:
                per_unit[quota.unit] = labels.gpus if quota.unit is QuotaUnit.GPUS else labels.vcpus
            per_node = per_unit[quota.unit]
            unknown = covered & np.isnan(per_node)
            units[q] = np.where(covered & ~unknown, np.nan_to_num(per_node), 0.0)
            if unknown.any():
                notes.append(
                    f"quota {quota.label} counts vCPUs but {int(unknown.sum())} offer(s) it covers give "
                    "none; they are planned without it"
                )
        headroom = np.maximum(np.array([q.limit - q.in_use for q in limits.quotas]) + units @ cand.current, 0.0)
        coarse = [lv for lv in LEVELS[1:] if lv in keys]
        finest = keys[coarse[0]] if coarse else np.zeros(n, np.int64)
        group = np.zeros(n, np.int64)
        if n and (coarse or len(limits.quotas)):
            # which quotas cover a pool (a bit each) and its units per node tell its quota rows apart
            signature = np.zeros(n, np.int64)
            for q in range(len(limits.quotas)):
                _, codes = np.unique(units[q], return_inverse=True)
                signature = signature * (int(codes.max()) + 1) + codes.reshape(-1) if q < 8 else signature
            columns = [finest, signature] + ([units[q] for q in range(8, len(limits.quotas))])
            _, group = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
        od = weighted[~spot]
        return cls(
            limits,
            weighted,
            spot,
            keys,
            names,
            units,
            headroom,
            group.reshape(-1).astype(np.int64),
            float(od.max()) if len(od) else 0.0,
            notes=notes,
        )

    def room(self) -> np.ndarray:
        """Per pool, the most spot weighted GPUs any plan may hold in its zone, region and
        provider together (the tightest capped level: ``max(s * (T - B), c)``); inf for
        on-demand pools and without zone, region or provider caps. Pools of one ``group``
        share it."""
        lim = self.limits
        most = np.inf
        for level, share in lim.shares:
            if level != "pool":
                most = min(most, max(share * (lim.target - lim.baseline), lim.floor))
        return np.where(self.spot, most, np.inf)

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
                notes.append(
                    f"{FIELD[level]} {share:g} binds in {len(full)} {level}(s) "
                    f"(e.g. {self.names[level][d]} holds {loads[d]:g} of {cap:g} weighted GPUs)"
                )
        used = self.quota_units @ counts
        for q, quota in enumerate(self.limits.quotas):
            if used[q] > 0 and used[q] >= self.headroom[q] - TOL:
                notes.append(
                    f"quota {quota.label} binds: the plan uses {used[q]:g} of the "
                    f"{self.headroom[q]:g} this fleet may hold"
                )
        return notes

    def rows(self, column_row, view_weighted: np.ndarray, od_cols: np.ndarray, binary_of) -> list:
        """The quota rows and the active cap rows as ``(cols, coefs, lb, ub)`` over model
        columns. ``column_row(pools, coefs)`` maps pools to columns; ``binary_of(level)`` gives
        the column of a level's binary ``u``."""
        from fleet.planning.milp import Row  # milp imports this module

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
            out.append(
                Row(
                    np.concatenate([cols, od_cols, [u]]),
                    np.concatenate([coefs, share * view_weighted[od_cols], [-m1]]),
                    ub=share * lim.target + TOL,
                )
            )
            out.append(Row(np.append(cols, u), np.append(coefs, m2), ub=lim.floor + m2 + TOL))
        return out

    def binary_levels(self) -> list[str]:
        """Levels whose active rows need the binary ``u`` (in a fixed order)."""
        shares = dict(self.limits.shares)
        return sorted({lv for lv, _ in self.active if not self.limits.fixed(shares[lv])}, key=LEVELS.index)


class _PoolIds:
    """Pool ids by index, built only for the pools a note names."""

    def __init__(self, offers: list[Offer]):
        self.offers = offers

    def __getitem__(self, i: int) -> str:
        return self.offers[i].pool.id

    def __len__(self) -> int:
        return len(self.offers)


def _covered(labels, quota: Quota) -> np.ndarray:
    """Which pools ``quota`` covers (``Quota.covers`` over label codes)."""

    def same(field: str, value: str) -> np.ndarray:
        hits = np.flatnonzero(labels.names(field) == value)
        return labels.codes(field) == (int(hits[0]) if len(hits) else -1)

    mask = same("provider", quota.provider)
    if quota.region:
        mask &= same("region", f"{quota.provider}/{quota.region}")
    if quota.market is not None:
        mask &= same("market", quota.market.value)
    if quota.accelerator:
        mask &= same("accelerator", quota.accelerator)
    if quota.zones:
        mask &= np.isin(labels.names("zone"), list(quota.zones))[labels.codes("zone")]
    if quota.instance_types:
        types = labels.names("instance_type")
        ok = np.array([any(fnmatchcase(t, p) for p in quota.instance_types) for t in types], bool)
        mask &= ok[labels.codes("instance_type")] if len(types) else mask
    return mask
