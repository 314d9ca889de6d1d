"""Applies a spec's rules to offers: the pools a plan may use, and why the others may not.

``select(spec, offers, current, blocked)`` returns ``Candidates``: the allowed pools as
parallel numpy arrays (sorted by pool id, so the result never depends on input order)
plus one ``Exclusion`` per rule that removed offers. Pure; one pass over the offers.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Collection, Mapping, Sequence

import numpy as np

from fleet.model import Exclusion, Market, Offer
from fleet.spec import FleetSpec, ProviderSettings

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
OVERSIZED_FOR = {level: f"one node exceeds diversification.max_{level}_share of the spot part"
                 for level in ("zone", "region", "provider")}
DUPLICATE = "duplicate pool id (cheapest kept)"


@dataclass
class Candidates:
    """Allowed pools. Arrays are indexed like ``offers``; ``upper`` is the most instances a
    pool may hold: what runs there now plus its capacity hint (instances still free to
    launch, as providers report it), and for spot the per-pool cap."""

    offers: list[Offer]
    price: np.ndarray          # $/h per node
    rate: np.ndarray           # interruptions per node-hour
    weighted: np.ndarray       # weighted GPUs per node (gpus x spec weight)
    spot: np.ndarray           # bool
    upper: np.ndarray          # float, may be inf for on-demand without a hint
    current: np.ndarray        # instances running now (int)
    hint: np.ndarray           # capacity hint: instances still free (inf when unknown)
    exclusions: list[Exclusion] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rule_counts: Counter = field(default_factory=Counter)
    placeable: list[Offer] = field(default_factory=list)   # pass every rule but the price limits
    _labels: "Labels | None" = None

    def __len__(self) -> int:
        return len(self.offers)

    def subset(self, index: np.ndarray) -> "Candidates":
        """The pools at ``index`` (exclusions and notes are shared)."""
        return Candidates([self.offers[i] for i in index], self.price[index], self.rate[index],
                          self.weighted[index], self.spot[index], self.upper[index], self.current[index],
                          self.hint[index], self.exclusions, self.notes, self.rule_counts, self.placeable,
                          None if self._labels is None else self._labels.subset(index))

    def labels(self) -> "Labels":
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

    def __init__(self, offers: list[Offer], index: np.ndarray | None = None, parent: "Labels | None" = None):
        self._offers, self._index, self._parent = offers, index, parent
        self._codes: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def of(cls, offers: list[Offer]) -> "Labels":
        return cls(offers)

    def _coded(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        if field not in self._codes:
            if self._parent is not None:
                codes, names = self._parent._coded(field)
                self._codes[field] = (codes[self._index], names)
            else:
                key, seen = self.FIELDS[field], {}
                codes = np.fromiter((seen.setdefault(key(o), len(seen)) for o in self._offers), np.int64,
                                    len(self._offers))
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
        return [base[i] for i in self._index]

    def subset(self, index: np.ndarray) -> "Labels":
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


def select(spec: FleetSpec, offers: Sequence[Offer], current: Mapping[str, int] | None = None,
           blocked: Collection[str] = ()) -> Candidates:
    """Check every rule of ``spec`` on every offer; see the module docstring."""
    current = {k: v for k, v in (current or {}).items() if v > 0}
    blocked_set = frozenset(b.strip("/") for b in blocked if b)
    lo, hi = spec.capacity.gpus_per_node.min, spec.capacity.gpus_per_node.max
    weights = spec.capacity.accelerators
    max_gpu_price = spec.budget.max_per_gpu_hour
    budget = spec.budget.max_per_hour
    settings_of: dict[str, ProviderSettings | None] = {}
    region_ok: dict[tuple[str, str], bool] = {}
    spot_market = Market.SPOT

    def placement(o: Offer) -> str:
        p = o.pool
        if p.provider not in settings_of:
            settings_of[p.provider] = spec.provider_settings(p.provider)
        settings = settings_of[p.provider]
        if settings is None:
            return PROVIDER
        if not (settings.spot if p.market is spot_market else settings.on_demand):
            return MARKET
        key = (p.provider, p.region)
        if key not in region_ok:
            region_ok[key] = settings.allows(p.region, "")
        if not region_ok[key]:
            return REGION
        if p.zone and (settings.zones is not None or settings.exclude_zones) and not settings.allows(p.region, p.zone):
            return ZONE
        return ""

    counts: Counter = Counter()
    examples: dict[str, str] = {}
    slot: dict[str, int] = {}          # pool id -> position in chosen (input order: memory-friendly)
    chosen: list[Offer] = []
    placeable: list[Offer] = []
    for o in offers:
        pid = o.pool.id
        if o.accelerator not in weights:
            reason = ACCELERATOR
        elif not lo <= o.gpus <= hi:
            reason = NODE_SIZE
        else:
            reason = placement(o) or (BLOCKED if blocked_set and is_blocked(pid, blocked_set) else "")
            if not reason:
                placeable.append(o)
                if max_gpu_price is not None and o.price_per_hour > max_gpu_price * o.gpus + 1e-12:
                    reason = PRICE_CAP
                elif budget is not None and o.price_per_hour > budget + 1e-12:
                    reason = OVER_BUDGET
                elif o.capacity_hint == 0 and not current.get(pid):
                    reason = NO_CAPACITY
        if reason:
            counts[reason] += 1
            if reason not in examples or pid < examples[reason]:
                examples[reason] = pid
            continue
        at = slot.get(pid)
        if at is None:
            slot[pid] = len(chosen)
            chosen.append(o)
            continue
        counts[DUPLICATE] += 1
        examples[DUPLICATE] = min(pid, examples.get(DUPLICATE, pid))
        other = chosen[at]
        if (o.price_per_hour, o.interruptions_per_hour) < (other.price_per_hour, other.interruptions_per_hour):
            chosen[at] = o

    chosen, ids = _without_oversized_spot_nodes(spec, chosen, list(slot), counts, examples)
    by_id = np.array(sorted(range(len(ids)), key=ids.__getitem__), np.int64)
    cand = arrays(spec, chosen, current, ids).subset(by_id)
    cand.rule_counts = counts
    cand.placeable = placeable
    cand.exclusions = [Exclusion(reason=r, pools=n, example=examples[r]) for r, n in counts.most_common()]
    kept = set(ids) if current else set()
    gone = sorted(pid for pid in current if pid not in kept)
    if gone:
        cand.notes.append(f"{len(gone)} pool(s) running now are no longer allowed or offered "
                          f"(e.g. {gone[0]}); their instances are not kept")
    return cand


def _without_oversized_spot_nodes(spec: FleetSpec, chosen: list[Offer], ids: list[str], counts: Counter,
                                  examples: dict[str, str]) -> tuple[list[Offer], list[str]]:
    """Drop spot pools whose one node holds more than ``spot_share_limit`` (reported as
    OVERSIZED), or more than a zone, region or provider cap allows any plan (its share of
    the largest spot part, ``gpus - on_demand_gpus``, or the smallest spot node). ``ids``
    are the pool ids of ``chosen``; returns the kept offers and their ids."""
    weights = spec.capacity.accelerators
    spot_market = Market.SPOT
    w = np.fromiter((o.gpus * weights[o.accelerator] for o in chosen), float, len(chosen))
    spot = np.fromiter((o.pool.market is spot_market for o in chosen), bool, len(chosen))
    spot_weights = w[spot]
    limits = [(OVERSIZED, spot_share_limit(spec, spot_weights))]
    part = spec.capacity.gpus - spec.capacity.on_demand_gpus
    smallest = float(np.min(spot_weights)) if len(spot_weights) else 0.0
    for level, reason in OVERSIZED_FOR.items():
        share = getattr(spec.diversification, f"max_{level}_share")
        if share < 1:
            limits.append((reason, max(share * part, smallest)))
    dropped = np.zeros(len(chosen), bool)
    for reason, limit in limits:                 # each pool under the first limit it breaks
        over = np.flatnonzero(spot & ~dropped & (w > limit + 1e-9))
        if len(over):
            counts[reason] += len(over)
            first = min(ids[i] for i in over)
            if reason not in examples or first < examples[reason]:
                examples[reason] = first
            dropped[over] = True
    if not dropped.any():
        return chosen, ids
    keep = np.flatnonzero(~dropped)
    return [chosen[i] for i in keep], [ids[i] for i in keep]


def arrays(spec: FleetSpec, offers: list[Offer], current: Mapping[str, int],
           ids: list[str] | None = None) -> Candidates:
    """``offers`` (already allowed; ``ids`` their pool ids if known) as a ``Candidates``
    with the spec's weights and caps."""
    n = len(offers)
    weights = spec.capacity.accelerators
    spot_market = Market.SPOT
    table = np.array([(o.price_per_hour, o.interruptions_per_hour if o.pool.market is spot_market else 0.0,
                       o.gpus * weights[o.accelerator], o.pool.market is spot_market,
                       math.inf if o.capacity_hint is None else o.capacity_hint) for o in offers],
                     float).reshape(n, 5)
    price, rate, weighted, hint = table[:, 0].copy(), table[:, 1].copy(), table[:, 2].copy(), table[:, 4].copy()
    spot = table[:, 3] > 0
    if current:
        ids = ids if ids is not None else [o.pool.id for o in offers]
        cur = np.fromiter((current.get(pid, 0) for pid in ids), float, n)
    else:
        cur = np.zeros(n)
    upper = hint + cur          # capacity_hint counts instances still free to launch
    limit = spot_share_limit(spec, weighted[spot])
    upper = np.where(spot, np.minimum(upper, spot_cap_nodes(limit, weighted)), upper)
    return Candidates(offers, price, rate, weighted, spot, upper, cur.astype(np.int64), hint)
