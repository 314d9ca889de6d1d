"""Azure offers: GPU VM sizes from Resource SKUs, priced from the shipped snapshot.

A pool is (region, zone, size, market). :func:`sku_places` reads one Resource SKU row and
returns the (region, zone) places this subscription may use: a ``Location`` restriction
removes the region, a ``Zone`` restriction removes those zones, a size without zones is offered
region-wide (zone ``""``). :func:`to_offers` joins those places with the snapshot's prices
(``fleet.catalog.snapshot_offers``: Azure sizes of the NC, ND and NV families); a size the
snapshot does not price is left out. Offers keep ``source="snapshot"`` so the plan's
provenance line names the snapshot as the source of the prices. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from fleet.model import Market, Offer, PoolKey
from fleet.spec import ProviderSettings

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


def to_offers(skus: Iterable[Any], priced: Iterable[Offer], settings: ProviderSettings) -> list[Offer]:
    """One offer per place and market the SKUs allow, the settings allow, and the snapshot prices."""
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
                if (market is Market.SPOT and not settings.spot) or (market is Market.ON_DEMAND and not settings.on_demand):
                    continue
                base = prices.get((region, size.lower(), market))
                if base is None:
                    continue
                pool = PoolKey(provider="azure", region=region, zone=zone, instance_type=size, market=market)
                found.setdefault(pool.id, base.model_copy(update={"pool": pool}))
    return sorted(found.values(), key=lambda o: o.pool.id)
