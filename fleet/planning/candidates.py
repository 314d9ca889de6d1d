"""Applies a spec's rules to offers: the pools a plan may use, and why the others may not.

``select(spec, offers, current, blocked)`` returns ``Candidates``: the allowed pools as
parallel numpy arrays (sorted by pool id, so the result never depends on input order)
plus one ``Exclusion`` per rule that removed offers. Pure; one pass over the offers.
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from fleet.model import Exclusion, Market, Offer
from fleet.spec import FleetSpec

#: Rule names in the order they are checked (an offer is reported under the first it fails).
ACCELERATOR = "accelerator not accepted"
NODE_SIZE = "GPUs per node outside gpus_per_node"
PROVIDER = "provider not enabled"
MARKET = "market disabled for provider"
REGION = "region not allowed"
ZONE = "zone not allowed"
BLOCKED = "blocked (recent capacity, quota or auth failure)"
PRICE_CAP = "over budget.max_per_gpu_hour"
OVER_BUDGET = "one node costs more than budget.max_per_hour"
NO_CAPACITY = "capacity hint is 0"
OVERSIZED = "one node exceeds diversification.max_pool_share of the spot part"
#: The same for each failure-domain cap (``fleet.planning.domains``), checked after the pool cap.
OVERSIZED_FOR = {
    level: f"one node exceeds diversification.max_{level}_share of the spot part"
    for level in ("zone", "region", "provider")
}
DUPLICATE = "duplicate pool id (cheapest kept)"


@dataclass
class Candidates:
    """Allowed pools. Arrays are indexed like ``offers``; ``upper`` is the most instances a
    pool may hold: what runs there now plus its capacity hint (instances still free to
    launch, as providers report it), and for spot the per-pool cap."""

    offers: list[Offer]
    price: np.ndarray  # $/h per node
    rate: np.ndarray  # interruptions per node-hour
    weighted: np.ndarray  # weighted GPUs per node (gpus x spec weight)
    spot: np.ndarray  # bool
    upper: np.ndarray  # float, may be inf for on-demand without a hint
    current: np.ndarray  # instances running now (int)
    hint: np.ndarray  # capacity hint: instances still free (inf when unknown)
    exclusions: list[Exclusion] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rule_counts: Counter = field(default_factory=Counter)
    placeable: list[Offer] = field(default_factory=list)  # pass every rule but the price limits
    _labels: Labels | None = None

    def __len__(self) -> int:
        return len(self.offers)

    def subset(self, index: np.ndarray) -> Candidates:
        """The pools at ``index`` (exclusions and notes are shared)."""
        return Candidates(
            [self.offers[i] for i in index],
            self.price[index],
            self.rate[index],
            self.weighted[index],
            self.spot[index],
            self.upper[index],
            self.current[index],
            self.hint[index],
            self.exclusions,
            self.notes,
            self.rule_counts,
            self.placeable,
            None if self._labels is None else self._labels.subset(index),
        )

    def labels(self) -> Labels:
        """The pools' provider, region, zone, market, accelerator and instance type as codes
        (computed once, carried by ``subset``)."""
        if self._labels is None:
            self._labels = Labels.of(self.offers)
        return self._labels


class Labels:
    """Per pool, a code into ``names(field)`` for each of ``FIELDS``, each computed on first
    use; ``gpus`` and ``vcpus`` (NaN where unknown) per node. Regions and zones are
    qualified (``aws/us-east-1``, ``aws/us-east-1/use1-az4``; ``-`` for a provider without
    zones)."""

    FIELDS = {
        "provider": lambda o: o.pool.provider,
        "region": lambda o: f"{o.pool.provider}/{o.pool.region}",
        "zone": lambda o: f"{o.pool.provider}/{o.pool.region}/{o.pool.zone or '-'}",
        "market": lambda o: o.pool.market.value,
        "accelerator": lambda o: o.accelerator,
        "instance_type": lambda o: o.pool.instance_type,
    }

    def __init__(self, offers: list[Offer], index: np.ndarray | None = None, parent: Labels | None = None):
        self._offers, self._index, self._parent = offers, index, parent
        self._codes: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def of(cls, offers: list[Offer]) -> Labels:
        return cls(offers)

    @classmethod
    def seeded(cls, offers: list[Offer], coded: dict[str, tuple[np.ndarray, np.ndarray]]) -> Labels:
        """Labels whose ``coded`` fields (codes numbered in order of first appearance, and
        names) are known already."""
        labels = cls(offers)
        labels._codes.update(coded)
        return labels

    def _coded(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        if field not in self._codes:
            if self._parent is not None:
                codes, names = self._parent._coded(field)
                self._codes[field] = (codes[self._index], names)
            else:
                key = self.FIELDS[field]
                seen: dict[object, int] = {}
                codes = np.fromiter(
                    (seen.setdefault(key(o), len(seen)) for o in self._offers), np.int64, len(self._offers)
                )
                self._codes[field] = (codes, np.array(list(seen), dtype=object))
        return self._codes[field]

    def codes(self, field: str) -> np.ndarray:
        return self._coded(field)[0]

    def names(self, field: str) -> np.ndarray:
        return self._coded(field)[1]

    @property
    def gpus(self) -> np.ndarray:
        return np.array([o.gpus for o in self._pool_offers()], float)

    @property
    def vcpus(self) -> np.ndarray:
        return np.array([np.nan if o.vcpus is None else o.vcpus for o in self._pool_offers()], float)

    def _pool_offers(self) -> list[Offer]:
        if self._parent is None:
            return self._offers
        base = self._parent._pool_offers()
        assert self._index is not None, "a subset's labels know their index in the parent's"
        return [base[i] for i in self._index]

    def subset(self, index: np.ndarray) -> Labels:
        return Labels(self._offers, index, self)


def spot_share_limit(spec: FleetSpec, spot_node_weights: np.ndarray) -> float:
    """Most weighted GPUs one spot pool may hold: ``max_pool_share`` of the spot part the spec
    asks for (target minus on-demand baseline), but never below the smallest spot node on
    offer, so node size alone never makes a spec infeasible. A bigger node cannot dodge the
    share: a pool whose single node exceeds the limit is left out."""
    part = spec.diversification.max_pool_share * (spec.capacity.gpus - spec.capacity.on_demand_gpus)
    smallest = float(np.min(spot_node_weights)) if len(spot_node_weights) else part
    return max(part, smallest)


def spot_cap_nodes(limit: float, weighted_per_node: np.ndarray | float) -> np.ndarray:
    """Most nodes one spot pool may hold under the weighted-GPU ``limit`` (at least one)."""
    return np.maximum(1.0, np.floor(limit / np.asarray(weighted_per_node, float) + 1e-9))


def is_blocked(pool_id: str, blocked: frozenset[str]) -> bool:
    """``blocked`` holds pool-id prefixes on ``/`` boundaries: provider, provider/region, ..., full id."""
    if not blocked:
        return False
    parts = pool_id.split("/")
    return any("/".join(parts[:k]) in blocked for k in range(1, len(parts) + 1))


#: Rule codes of ``select`` (0: allowed), in the order the rules are checked.
_RULES = (ACCELERATOR, NODE_SIZE, PROVIDER, MARKET, REGION, ZONE, BLOCKED, PRICE_CAP, OVER_BUDGET, NO_CAPACITY)
_CODE = {rule: k + 1 for k, rule in enumerate(_RULES)}
_MARKET_VALUE = {m: m.value for m in Market}


_OFFER_FIELDS = operator.attrgetter(
    "pool", "accelerator", "gpus", "price_per_hour", "interruptions_per_hour", "capacity_hint"
)
_POOL_FIELDS = operator.attrgetter("provider", "region", "zone", "instance_type", "market")


class _Columns:
    """What the rules read of each offer, read in one pass (attribute getters and a transpose
    in C: a 100k-offer catalog is read in about 0.1 s). ``ids`` are ``PoolKey.id`` in its
    format, built without a property call per offer; ``places`` numbers the distinct
    (provider, market, region, zone) and ``place`` holds each offer's number; ``acc`` codes
    into ``acc_names``."""

    def __init__(self, offers: list[Offer]):
        n = len(offers)
        if n:
            pools, accs, gpus, price, rate, hint = zip(*map(_OFFER_FIELDS, offers))
            provider, region, zone, itype, market = zip(*map(_POOL_FIELDS, pools))
        else:
            accs = gpus = price = rate = hint = provider = region = zone = itype = market = ()
        mv = _MARKET_VALUE
        self.ids = [f"{p}/{r}/{z or '-'}/{t}/{mv[m]}" for p, r, z, t, m in zip(provider, region, zone, itype, market)]
        self.places: dict[tuple, int] = {}
        setp = self.places.setdefault
        self.place = np.fromiter((setp(k, len(self.places)) for k in zip(provider, market, region, zone)), np.int64, n)
        names: dict[str, int] = {}
        self.acc = np.fromiter((names.setdefault(a, len(names)) for a in accs), np.int64, n)
        self.acc_names = list(names)
        self.gpus = np.array(gpus, float)
        self.price = np.array(price, float)
        self.rate = np.array(rate, float)
        hints = np.array(hint, float)  # None -> nan: unknown, as inf
        self.hint = np.where(np.isnan(hints), math.inf, hints)
        spot = Market.SPOT
        self.spot = np.fromiter((m is spot for m in market), bool, n)

    def labels(self, rows: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``Labels`` codes and names of the offers at ``rows`` for the location fields and the
        market and accelerator, from the distinct places (as ``Labels`` numbers them: in
        order of first appearance)."""
        fields = {
            "provider": lambda p, m, r, z: p,
            "region": lambda p, m, r, z: f"{p}/{r}",
            "zone": lambda p, m, r, z: f"{p}/{r}/{z or '-'}",
            "market": lambda p, m, r, z: m.value,
        }
        out = {}
        for name, key in fields.items():
            seen: dict[str, int] = {}
            of_place = np.array([seen.setdefault(key(*k), len(seen)) for k in self.places], np.int64)
            out[name] = _first_seen(of_place[self.place[rows]] if len(of_place) else np.zeros(0, np.int64), list(seen))
        out["accelerator"] = _first_seen(self.acc[rows], self.acc_names)
        return out


def _first_seen(codes: np.ndarray, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``codes`` into ``names`` renumbered in order of first appearance, with their names."""
    uniq, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse.reshape(-1)].astype(np.int64), np.array([names[c] for c in uniq[order]], dtype=object)


def pool_ids(offers: Sequence[Offer]) -> list[str]:
    """``o.pool.id`` of every offer (``_Columns``)."""
    return _Columns(list(offers)).ids


def select(
    spec: FleetSpec, offers: Sequence[Offer], current: Mapping[str, int] | None = None, blocked: Collection[str] = ()
) -> Candidates:
    """Check every rule of ``spec`` on every offer; see the module docstring.

    Vectorised: one pass over the offers reads what the rules need, the location rules are
    decided once per distinct (provider, market, region, zone) and the others over arrays."""
    current = {k: v for k, v in (current or {}).items() if v > 0}
    blocked_set = frozenset(b.strip("/") for b in blocked if b)
    offers = offers if isinstance(offers, list) else list(offers)
    n = len(offers)
    lo, hi = spec.capacity.gpus_per_node.min, spec.capacity.gpus_per_node.max
    weights = spec.capacity.accelerators
    max_gpu_price = spec.budget.max_per_gpu_hour
    budget = spec.budget.max_per_hour

    cols = _Columns(offers)
    ids, acc, gpus, price, hint = cols.ids, cols.acc, cols.gpus, cols.price, cols.hint
    accs, places, place = cols.acc_names, cols.places, cols.place

    rule = np.zeros(n, np.int8)

    def mark(code: int, where: np.ndarray) -> None:
        rule[(rule == 0) & where] = code

    mark(_CODE[ACCELERATOR], ~np.array([a in weights for a in accs], bool)[acc])
    mark(_CODE[NODE_SIZE], (gpus < lo) | (gpus > hi))
    by_place = np.array([_location_rule(spec, *key) for key in places], np.int8)
    located = rule == 0
    rule[located] = by_place[place[located]]
    if blocked_set:
        open_ = np.flatnonzero(rule == 0)
        hit = np.fromiter((is_blocked(ids[i], blocked_set) for i in open_), bool, len(open_))
        rule[open_[hit]] = _CODE[BLOCKED]
    placeable_mask = rule == 0
    if max_gpu_price is not None:
        mark(_CODE[PRICE_CAP], price > max_gpu_price * gpus + 1e-12)
    if budget is not None:
        mark(_CODE[OVER_BUDGET], price > budget + 1e-12)
    empty = np.flatnonzero((rule == 0) & (hint == 0))
    if current and len(empty):
        empty = empty[[not current.get(ids[i]) for i in empty]]
    rule[empty] = _CODE[NO_CAPACITY]

    # the reasons in the order an offer first failed them (as one pass over the offers reports them)
    firsts: list[tuple[int, str, int, str]] = []
    failed = np.flatnonzero(rule)
    if len(failed):
        codes, first, count = np.unique(rule[failed], return_index=True, return_counts=True)
        for code, f, c in zip(codes.tolist(), first.tolist(), count.tolist()):
            members = failed[rule[failed] == code]
            firsts.append((int(failed[f]), _RULES[code - 1], c, min(ids[i] for i in members)))
    allowed = np.flatnonzero(rule == 0)
    chosen, duplicate = _first_cheapest(offers, ids, allowed, price)
    if duplicate is not None:
        firsts.append(duplicate)
    counts: Counter = Counter()
    examples: dict[str, str] = {}
    for _, reason, c, example in sorted(firsts):
        counts[reason] = c
        examples[reason] = example

    spot = cols.spot[chosen]
    w = gpus[chosen] * np.array([weights.get(a, 0.0) for a in accs], float)[acc[chosen]]
    keep = _without_oversized_spot_nodes(spec, w, spot, [ids[i] for i in chosen], counts, examples)
    kept = chosen[keep]
    kept_ids = [ids[i] for i in kept]
    by_id = np.array(sorted(range(len(kept_ids)), key=kept_ids.__getitem__), np.int64)
    kept, kept_ids = kept[by_id], [kept_ids[i] for i in by_id]
    cand = _candidates(
        spec,
        [offers[i] for i in kept],
        kept_ids,
        price[kept],
        cols.rate[kept],
        w[keep][by_id],
        spot[keep][by_id],
        hint[kept],
        current,
    )
    cand._labels = Labels.seeded(cand.offers, cols.labels(kept))
    cand.rule_counts = counts
    cand.placeable = [offers[i] for i in np.flatnonzero(placeable_mask)]
    cand.exclusions = [Exclusion(reason=r, pools=n, example=examples[r]) for r, n in counts.most_common()]
    kept_set = set(kept_ids) if current else set()
    gone = sorted(pid for pid in current if pid not in kept_set)
    if gone:
        cand.notes.append(
            f"{len(gone)} pool(s) running now are no longer allowed or offered "
            f"(e.g. {gone[0]}); their instances are not kept"
        )
    return cand


def _location_rule(spec: FleetSpec, provider: str, market: Market, region: str, zone: str) -> int:
    """The first location rule (provider, market, region, zone) a pool there fails; 0 if none."""
    settings = spec.provider_settings(provider)
    if settings is None:
        return _CODE[PROVIDER]
    if not (settings.spot if market is Market.SPOT else settings.on_demand):
        return _CODE[MARKET]
    if not settings.allows(region, ""):
        return _CODE[REGION]
    if zone and (settings.zones is not None or settings.exclude_zones) and not settings.allows(region, zone):
        return _CODE[ZONE]
    return 0


def _first_cheapest(
    offers: list[Offer], ids: list[str], allowed: np.ndarray, price: np.ndarray
) -> tuple[np.ndarray, tuple[int, str, int, str] | None]:
    """One offer per pool id among ``allowed`` (input order of each id's first offer): the
    cheapest, then steadiest, the first of equals. With duplicates, also ``(index of the first
    duplicate, DUPLICATE, how many, the smallest duplicated id)``."""
    allowed_ids = [ids[i] for i in allowed]
    if len(set(allowed_ids)) == len(allowed_ids):
        return allowed, None
    slot: dict[str, int] = {}
    chosen: list[int] = []
    dups, first_dup, example = 0, -1, ""
    for i, pid in zip(allowed.tolist(), allowed_ids):
        at = slot.get(pid)
        if at is None:
            slot[pid] = len(chosen)
            chosen.append(i)
            continue
        dups += 1
        if first_dup < 0:
            first_dup, example = i, pid
        example = min(example, pid)
        other = chosen[at]
        if (price[i], offers[i].interruptions_per_hour) < (price[other], offers[other].interruptions_per_hour):
            chosen[at] = i
    return np.array(chosen, np.int64), (first_dup, DUPLICATE, dups, example)


def _without_oversized_spot_nodes(
    spec: FleetSpec, w: np.ndarray, spot: np.ndarray, ids: list[str], counts: Counter, examples: dict[str, str]
) -> np.ndarray:
    """Indices of the pools to keep: spot pools whose one node (``w`` weighted GPUs) holds more
    than ``spot_share_limit`` (reported as OVERSIZED), or more than a zone, region or provider
    cap allows any plan (its share of the largest spot part, ``gpus - on_demand_gpus``, or the
    smallest spot node), are dropped. ``ids`` are the pools' ids."""
    spot_weights = w[spot]
    limits = [(OVERSIZED, spot_share_limit(spec, spot_weights))]
    part = spec.capacity.gpus - spec.capacity.on_demand_gpus
    smallest = float(np.min(spot_weights)) if len(spot_weights) else 0.0
    for level, reason in OVERSIZED_FOR.items():
        share = getattr(spec.diversification, f"max_{level}_share")
        if share < 1:
            limits.append((reason, max(share * part, smallest)))
    dropped = np.zeros(len(w), bool)
    for reason, limit in limits:  # each pool under the first limit it breaks
        over = np.flatnonzero(spot & ~dropped & (w > limit + 1e-9))
        if len(over):
            counts[reason] += len(over)
            first = min(ids[i] for i in over)
            if reason not in examples or first < examples[reason]:
                examples[reason] = first
            dropped[over] = True
    return np.flatnonzero(~dropped)


def arrays(
    spec: FleetSpec, offers: list[Offer], current: Mapping[str, int], ids: list[str] | None = None
) -> Candidates:
    """``offers`` (already allowed; ``ids`` their pool ids if known) as a ``Candidates``
    with the spec's weights and caps."""
    n = len(offers)
    weights = spec.capacity.accelerators
    spot_market = Market.SPOT
    table = np.array(
        [
            (
                o.price_per_hour,
                o.interruptions_per_hour,
                o.gpus * weights[o.accelerator],
                o.pool.market is spot_market,
                math.inf if o.capacity_hint is None else o.capacity_hint,
            )
            for o in offers
        ],
        float,
    ).reshape(n, 5)
    return _candidates(
        spec,
        offers,
        ids,
        table[:, 0].copy(),
        table[:, 1].copy(),
        table[:, 2].copy(),
        table[:, 3] > 0,
        table[:, 4].copy(),
        current,
    )


def _candidates(
    spec: FleetSpec,
    offers: list[Offer],
    ids: list[str] | None,
    price: np.ndarray,
    rate: np.ndarray,
    weighted: np.ndarray,
    spot: np.ndarray,
    hint: np.ndarray,
    current: Mapping[str, int],
) -> Candidates:
    """The ``Candidates`` of allowed ``offers`` from their prices, rates (0 taken for
    on-demand), weights, markets and hints: what runs now, and the bounds with the per-pool
    spot cap."""
    n = len(offers)
    rate = np.where(spot, rate, 0.0)
    if current:
        ids = ids if ids is not None else pool_ids(offers)
        cur = np.fromiter((current.get(pid, 0) for pid in ids), float, n)
    else:
        cur = np.zeros(n)
    upper = hint + cur  # capacity_hint counts instances still free to launch
    limit = spot_share_limit(spec, weighted[spot])
    upper = np.where(spot, np.minimum(upper, spot_cap_nodes(limit, weighted)), upper)
    return Candidates(offers, price, rate, weighted, spot, upper, cur.astype(np.int64), hint)
