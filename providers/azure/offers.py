"""Azure offers: GPU VM sizes from Resource SKUs, priced live (Retail Prices) or from the snapshot.

A pool is (region, zone, size, market). :func:`sku_places` reads one Resource SKU row and
returns the (region, zone) places this subscription may use: a ``Location`` restriction
removes the region, a ``Zone`` restriction removes those zones, a size without zones is offered
region-wide (zone ``""``). :func:`to_offers` joins those places with the snapshot
(``fleet.catalog.snapshot_offers``: which NC/ND/NV sizes carry which GPUs, and their list
prices); a size the snapshot does not know is left out. A live price (``providers.azure.prices``)
replaces the snapshot's and marks the offer ``source="azure-retail-prices"``; the others keep
``source="snapshot"``, so the plan's provenance line names where the prices came from. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from fleet.model import Market, Offer, PoolKey
from providers.azure.settings import AzureSettings

#: The GPU families: NC (compute), ND (training), NV (visualisation).
GPU_SIZE = re.compile(r"^Standard_N[CDV]\d", re.I)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def sku_places(sku: Any) -> list[tuple[str, str]]:
    """The (region, zone) places a VM-size SKU row allows this subscription (zone "" = regional)."""
    if _get(sku, "resource_type", _get(sku, "resourceType")) != "virtualMachines":
        return []
    name = str(_get(sku, "name") or "")
    if not GPU_SIZE.match(name):
        return []
    blocked_regions: set[str] = set()
    blocked_zones: dict[str, set[str]] = {}
    for r in _get(sku, "restrictions") or []:
        info = _get(r, "restriction_info", _get(r, "restrictionInfo")) or {}
        kind = str(_get(r, "type") or "")
        if kind == "Location":
            blocked_regions.update(x.lower() for x in (_get(info, "locations") or _get(r, "values") or []))
        elif kind == "Zone":
            for loc in _get(info, "locations") or _get(r, "values") or []:
                blocked_zones.setdefault(loc.lower(), set()).update(_get(info, "zones") or [])
    out = []
    for info in _get(sku, "location_info", _get(sku, "locationInfo")) or []:
        region = str(_get(info, "location") or "").lower()
        if not region or region in blocked_regions:
            continue
        zones = [z for z in (_get(info, "zones") or []) if z not in blocked_zones.get(region, set())]
        if _get(info, "zones"):
            out.extend((region, z) for z in sorted(zones))
        else:
            out.append((region, ""))
    return out


LIVE_SOURCE = "azure-retail-prices"


def wanted_sizes(skus: Iterable[Any], priced: Iterable[Offer], settings: AzureSettings) -> dict[str, set[str]]:
    """Region -> the sizes worth pricing there (offered by the SKUs, allowed, known to the snapshot)."""
    known = {o.pool.instance_type.lower() for o in priced if o.pool.provider == "azure"}
    out: dict[str, set[str]] = {}
    for sku in skus:
        size = str(_get(sku, "name") or "")
        if size.lower() not in known:
            continue
        for region, zone in sku_places(sku):
            if settings.allows(region, zone):
                out.setdefault(region, set()).add(size)
    return out


def to_offers(
    skus: Iterable[Any],
    priced: Iterable[Offer],
    settings: AzureSettings,
    live: Mapping[tuple[str, str, Market], float] | None = None,
) -> list[Offer]:
    """One offer per place and market the SKUs allow, the settings allow, and the snapshot knows;
    priced from ``live`` ((region, size lower, market) -> USD/h) where it has the size."""
    live = live or {}
    prices: dict[tuple[str, str, Market], Offer] = {}
    for o in priced:
        if o.pool.provider == "azure":
            prices[(o.pool.region.lower(), o.pool.instance_type.lower(), o.market)] = o
    found: dict[str, Offer] = {}
    for sku in skus:
        size = str(_get(sku, "name") or "")
        for region, zone in sku_places(sku):
            if not settings.allows(region, zone):
                continue
            for market in (Market.SPOT, Market.ON_DEMAND):
                if (market is Market.SPOT and not settings.spot) or (
                    market is Market.ON_DEMAND and not settings.on_demand
                ):
                    continue
                base = prices.get((region, size.lower(), market))
                if base is None:
                    continue
                pool = PoolKey(provider="azure", region=region, zone=zone, instance_type=size, market=market)
                update: dict[str, Any] = {"pool": pool}
                price = live.get((region, size.lower(), market))
                if price is not None:
                    update.update(
                        price_per_hour=price,
                        source=LIVE_SOURCE,
                        on_demand_price=live.get((region, size.lower(), Market.ON_DEMAND), base.on_demand_price),
                    )
                found.setdefault(pool.id, base.model_copy(update=update))
    return sorted(found.values(), key=lambda o: o.pool.id)
