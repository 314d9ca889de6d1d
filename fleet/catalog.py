"""Where offers come from: live provider prices, or the offline snapshot shipped with the package.

The snapshot (``fleet/data/catalog/gpu_offers.csv``, public list prices read from the
SkyPilot catalog on 2026-11-29, see ``SOURCE.md``) serves when live prices are not
available and seeds the embedded local cloud. Interruption estimates in the snapshot
are provider priors, except GCP H100 zones that have a recorded availability trace.
Vast.ai locations become region names like ``us-texas`` (see ``vast_region``).
"""

from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

from fleet.model import InterruptionSource, Market, Offer, PoolKey
from fleet.traces import trace_for_zone

if TYPE_CHECKING:
    from fleet.spec import FleetSpec
    from providers.base import OfferQuery, Provider

SNAPSHOT_DATE = "2026-11-29"
SNAPSHOT_SOURCE = "public list prices from the SkyPilot catalog (skypilot-org/skypilot-catalog)"

#: Spot interruptions per instance-hour assumed when nothing better is known.
#: Anchored on the shipped GCP H100 traces (median zone ~0.24/h) and AWS V100 traces.
SPOT_PRIOR_PER_HOUR: dict[str, float] = {
    "aws": 0.10,
    "gcp": 0.20,
    "azure": 0.15,
    "runpod": 0.12,
    "vast": 0.25,
}
ON_DEMAND_ONLY = ("lambda",)


def spot_not_sold(providers: Iterable[str] | None = None) -> frozenset[str]:
    """Providers whose adapter says their API sells no interruptible capacity (registration record
    ``spot=False``, e.g. RunPod: its API v2 has no interruptible pods). Their snapshot spot rows
    are kept, so a plan can say why it does not use them, but with ``capacity_hint=0``: the planner
    never picks them. With ``providers``, only those are asked (only their records are read, so
    only their packages are imported); names spotfleet does not know sell nothing it can tell of."""
    from providers.registry import names, record, records

    if providers is None:
        return frozenset(name for name, rec in records().items() if not rec.spot)
    known = set(names())
    return frozenset(name for name in providers if name in known and not record(name).spot)


@dataclass(frozen=True)
class CatalogInfo:
    """Provenance of a set of offers, shown by ``fleet offers`` and ``fleet plan``."""

    source: str  # "snapshot" | "live" | "local"
    detail: str
    fetched_at: float = 0.0
    fallbacks: tuple[str, ...] = ()  # providers whose live fetch failed


def _f(value: str) -> float | None:
    return float(value) if value else None


def vast_region(location: str) -> str:
    """A Vast.ai location string as a region name: ``"Texas, US, NA"`` -> ``"us-texas"``,
    ``", US, NA"`` -> ``"us"``, so pool ids stay free of spaces and commas."""
    parts = [p.strip() for p in location.split(",")]
    place, country = (parts + ["", ""])[:2]
    slug = re.sub(r"[^a-z0-9]+", "-", place.lower()).strip("-")
    country = country.lower()
    return f"{country}-{slug}" if slug else (country or "unknown")


@lru_cache(maxsize=1)
def _snapshot_rows() -> tuple[dict[str, str], ...]:
    """The snapshot's rows that name an instance type (GCP attachable-accelerator rows do not:
    they price a GPU without its host VM), in file order."""
    text = resources.files("fleet.data").joinpath("catalog/gpu_offers.csv").read_text()
    return tuple(row for row in csv.DictReader(io.StringIO(text)) if row["instance_type"])


def _row_offers(row: dict[str, str], not_sold: frozenset[str]) -> list[Offer]:
    """The on-demand and spot offers of one snapshot row."""
    provider = row["provider"]
    on_demand = _f(row["on_demand_usd_per_hour"])
    spot = _f(row["spot_usd_per_hour"])
    common = dict(
        accelerator=row["accelerator"],
        gpus=int(row["accelerator_count"]),
        vcpus=_f(row["vcpus"]),
        memory_gib=_f(row["memory_gib"]),
        on_demand_price=on_demand,
        source="snapshot",
    )
    region = vast_region(row["region"]) if provider == "vast" else row["region"]
    pool = dict(provider=provider, region=region, zone=row["zone"], instance_type=row["instance_type"])
    out: list[Offer] = []
    if on_demand is not None:
        out.append(Offer(pool=PoolKey(**pool, market=Market.ON_DEMAND), price_per_hour=on_demand, **common))
    if spot is not None and provider not in ON_DEMAND_ONLY:
        rate, src = spot_interruption_estimate(provider, row["zone"], row["accelerator"])
        out.append(
            Offer(
                pool=PoolKey(**pool, market=Market.SPOT),
                price_per_hour=spot,
                interruptions_per_hour=rate,
                interruption_source=src,
                capacity_hint=0 if provider in not_sold else None,
                **common,
            )
        )
    return out


@lru_cache(maxsize=32)
def _snapshot_offers(accelerators: frozenset[str] | None, provider: str | None = None) -> tuple[Offer, ...]:
    rows = [
        row
        for row in _snapshot_rows()
        if (accelerators is None or row["accelerator"] in accelerators)
        and (provider is None or row["provider"] == provider)
    ]
    not_sold = spot_not_sold(None if provider is None and accelerators is None else {row["provider"] for row in rows})
    return tuple(o for row in rows for o in _row_offers(row, not_sold))


def snapshot_offers() -> tuple[Offer, ...]:
    """Every launchable pool in the snapshot, in file order."""
    return _snapshot_offers(None)


def snapshot_offers_of(accelerators: Iterable[str] | None, *, provider: str | None = None) -> tuple[Offer, ...]:
    """The snapshot's offers of ``accelerators`` (names as the snapshot writes them; ``None``: all),
    of ``provider`` only when one is named, in file order: the part of :func:`snapshot_offers`
    that holds them, without building the rest (a plan for H100s reads about a seventh of the
    snapshot; the local cloud models one vendor's pools at a time)."""
    return _snapshot_offers(None if accelerators is None else frozenset(accelerators), provider)


def on_demand_reference(pool_ids: Iterable[str]) -> dict[str, float]:
    """Pool id -> the snapshot's on-demand price of the same instance type, for the ids it knows:
    the pool's own row, else the type's on-demand price in the same region (zones of a region
    list one price). The reference that costs an instance found by tag (``fleet repair``, a
    crashed ``up``) when no plan priced its pool; ids the snapshot does not know are left out."""
    by_pool: dict[str, float] = {}
    by_type: dict[tuple[str, str, str], float] = {}
    for o in (*snapshot_offers(), *cpu_offers()):
        if o.on_demand_price is not None:
            by_pool[o.pool.id] = o.on_demand_price
            by_type.setdefault((o.pool.provider, o.pool.region, o.pool.instance_type), o.on_demand_price)
    out: dict[str, float] = {}
    for pool_id in pool_ids:
        parts = pool_id.split("/")
        price = by_pool.get(pool_id)
        if price is None and len(parts) == 5:
            price = by_type.get((parts[0], parts[1], parts[3]))
        if price is not None:
            out[pool_id] = price
    return out


#: The accelerator name of CPU-only types (``gpus == 0``), offered for head nodes only.
CPU = "CPU"


@lru_cache(maxsize=1)
def cpu_offers() -> tuple[Offer, ...]:
    """General-purpose on-demand types for head nodes (``catalog/cpu_offers.csv``, see ``SOURCE.md``)."""
    text = resources.files("fleet.data").joinpath("catalog/cpu_offers.csv").read_text()
    return tuple(
        Offer(
            pool=PoolKey(
                provider=row["provider"],
                region=row["region"],
                zone=row["zone"],
                instance_type=row["instance_type"],
                market=Market.ON_DEMAND,
            ),
            accelerator=CPU,
            gpus=0,
            vcpus=float(row["vcpus"]),
            memory_gib=float(row["memory_gib"]),
            price_per_hour=float(row["on_demand_usd_per_hour"]),
            on_demand_price=float(row["on_demand_usd_per_hour"]),
            source="snapshot",
        )
        for row in csv.DictReader(io.StringIO(text))
    )


def spot_interruption_estimate(provider: str, zone: str, accelerator: str) -> tuple[float, InterruptionSource]:
    """Best offline estimate of a spot pool's interruption rate per instance-hour."""
    if provider == "gcp" and accelerator == "H100" and zone:
        trace = trace_for_zone(zone)
        if trace is not None:
            return trace.preemptions_per_hour, InterruptionSource.TRACE
    return SPOT_PRIOR_PER_HOUR.get(provider, 0.2), InterruptionSource.PROVIDER_PRIOR


def filter_for_spec(offers: Iterable[Offer], spec: FleetSpec) -> list[Offer]:
    """Offers whose accelerator, node size, provider and market the spec accepts.

    Region/zone rules, budget and price caps are left to the planner, which reports
    what they excluded.
    """
    lo, hi = spec.capacity.gpus_per_node.min, spec.capacity.gpus_per_node.max
    out = []
    for o in offers:
        if o.accelerator not in spec.capacity.accelerators or not (lo <= o.gpus <= hi):
            continue
        settings = spec.provider_settings(o.pool.provider)
        if settings is None:
            continue
        if (o.market is Market.SPOT and not settings.spot) or (o.market is Market.ON_DEMAND and not settings.on_demand):
            continue
        out.append(o)
    return out


@dataclass
class Catalog:
    """Gathers offers from providers with a TTL cache; falls back to the snapshot.

    ``providers`` maps provider name to a live adapter; with none, every offer comes
    from the snapshot. A provider whose fetch fails is reported in
    ``CatalogInfo.fallbacks`` and served from the snapshot.
    """

    providers: dict[str, Provider] = field(default_factory=dict)
    ttl_seconds: float = 600.0
    _cache: dict[tuple[str, OfferQuery], tuple[float, list[Offer]]] = field(default_factory=dict)

    def offers(self, query: OfferQuery, *, only: Iterable[str] | None = None) -> tuple[list[Offer], CatalogInfo]:
        from fleet.errors import ProviderError

        wanted = set(only) if only is not None else None
        if not self.providers:
            offers = [o for o in (*_snapshot_for(query), *cpu_offers()) if wanted is None or o.pool.provider in wanted]
            return matching(offers, query), CatalogInfo("snapshot", f"{SNAPSHOT_SOURCE}, read {SNAPSHOT_DATE}")
        out: list[Offer] = []
        fallbacks: list[str] = []
        now = time.time()
        for name, provider in sorted(self.providers.items()):
            if wanted is not None and name not in wanted:
                continue
            cached = self._cache.get((name, query))
            if cached and now - cached[0] < self.ttl_seconds:
                out.extend(cached[1])
                continue
            try:
                got = provider.list_offers(query)
            except ProviderError:
                fallbacks.append(name)
                got = [o for o in _snapshot_for(query) if o.pool.provider == name]
            self._cache[(name, query)] = (now, got)
            out.extend(got)
        sources = {o.source for o in out} or {"live"}
        source = "local" if sources == {"local"} else ("live" if "snapshot" not in sources else "snapshot")
        matched = matching(out, query)
        detail = _describe(source, sorted(self.providers), len(matched))
        mixed = sorted(x for x in sources if x not in ("live", "local", "snapshot"))
        if mixed:  # an adapter that fell back for part of its answer names the part
            detail += f" (offer sources: {', '.join(mixed)})"
        return matched, CatalogInfo(source, detail, now, tuple(fallbacks))


def _snapshot_for(query: OfferQuery) -> tuple[Offer, ...]:
    """What :func:`matching` can admit of the snapshot for ``query``: only its accelerators' offers
    are built when it names some."""
    return snapshot_offers_of({a.upper() for a in query.accelerators}) if query.accelerators else snapshot_offers()


def _describe(source: str, providers: list[str], count: int) -> str:
    """One phrase saying where offers came from, for the ``offers:`` line people read."""
    if source == "local":
        return (
            f"{count} offers with current simulated prices and capacity from the embedded local cloud "
            f"({', '.join(providers)})"
        )
    if source == "live":
        return f"{count} offers with live prices from {', '.join(providers)}"
    return (
        f"{count} offers, live where available ({', '.join(providers)}), else {SNAPSHOT_SOURCE}, read {SNAPSHOT_DATE}"
    )


def matching(offers: Iterable[Offer], query: OfferQuery) -> list[Offer]:
    """The ``offers`` that ``query`` admits (accelerators, markets, regions)."""
    accs = {a.upper() for a in query.accelerators}
    regions = set(query.regions)
    return [
        o
        for o in offers
        if (not accs or o.accelerator in accs)
        and (query.spot or o.market is not Market.SPOT)
        and (query.on_demand or o.market is not Market.ON_DEMAND)
        and (not regions or o.pool.region in regions)
    ]
