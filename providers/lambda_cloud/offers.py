"""Lambda instance types as spotfleet offers (pure: maps the ``GET /instance-types`` answer; no I/O).

Lambda sells on-demand only. Each type lists the regions that have capacity for it *now*
(``regions_with_capacity_available``); a type/region that is not listed is not offered, so the
planner never plans into a pool Lambda would refuse. One pool is (region, type), zone empty
(Lambda has no zones). Price: ``price_cents_per_hour`` / 100, the same in every region.

:func:`accelerator` reads the catalog's accelerator from ``gpu_description``
(``"H100 (80 GB SXM5)"``, ``"A100 (40 GB SXM4)"``, ``"Quadro RTX 6000 (24 GB)"``): the name
with its memory first (``A100-40GB``), then the bare name, after dropping the words Lambda puts
before some names. A type with no GPUs is ``CPU`` (offered for head nodes only).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from fleet.accelerators import canonical
from fleet.catalog import CPU
from fleet.model import Market, Offer, PoolKey
from providers.lambda_cloud.schemas import Instance, InstanceType, TypeItem

PROVIDER = "lambda"
_DESCRIPTION = re.compile(r"^\s*(?P<name>[^(]+?)\s*(?:\((?P<mem>\d+)\s*GB[^)]*\))?\s*$", re.IGNORECASE)
#: Words before a GPU name that the catalog does not use (``Quadro RTX 6000``, ``RTX A6000``).
_NOISE = re.compile(r"^(QUADRO\s+|RTX\s+(?=A\d))", re.IGNORECASE)


def accelerator(gpu_description: str, gpus: int = 1) -> str | None:
    """The catalog accelerator of a Lambda ``gpu_description``; None when spotfleet does not know it."""
    if gpus == 0:
        return CPU
    m = _DESCRIPTION.match(gpu_description or "")
    if not m:
        return None
    name = _NOISE.sub("", m.group("name"))
    if m.group("mem"):
        with_memory = canonical(f"{name}-{m.group('mem')}GB")
        if with_memory is not None:
            return with_memory
    return canonical(name)


def pool(region: str, instance_type: str) -> PoolKey:
    return PoolKey(provider=PROVIDER, region=region, zone="", instance_type=instance_type, market=Market.ON_DEMAND)


def _offer(region: str, t: InstanceType, acc: str, **extra) -> Offer:
    price = round(t.price_cents_per_hour / 100, 4)
    return Offer(
        pool=pool(region, t.name),
        accelerator=acc,
        gpus=t.specs.gpus,
        vcpus=float(t.specs.vcpus),
        memory_gib=float(t.specs.memory_gib),
        price_per_hour=price,
        on_demand_price=price,
        source="live",
        **extra,
    )


def to_offers(
    types: Mapping[str, TypeItem],
    *,
    accelerators: Iterable[str] = (),
    regions: Iterable[str] = (),
    allows=lambda region: True,
) -> list[Offer]:
    """One on-demand offer per type and region with capacity now, for the wanted accelerators
    and regions (empty: all, CPU types included) that ``allows(region)`` accepts; unknown GPUs
    are left out."""
    accs, wanted = {a.upper() for a in accelerators}, set(regions)
    out = []
    for item in types.values():
        t = item.instance_type
        acc = accelerator(t.gpu_description, t.specs.gpus)
        if acc is None or (accs and acc not in accs):
            continue
        for region in item.regions_with_capacity_available:
            if (wanted and region.name not in wanted) or not allows(region.name):
                continue
            out.append(_offer(region.name, t, acc))
    return sorted(out, key=lambda o: o.pool.id)


def occupied_offers(rows: Iterable[Instance], listed: Iterable[str]) -> list[Offer]:
    """Offers of capacity 0 for the pools spotfleet's instances (``rows``) hold that are not
    ``listed`` (the type's capacity there is spent: the planner must still see where it runs)."""
    seen = set(listed)
    out = []
    for row in rows:
        t = row.instance_type
        acc = accelerator(t.gpu_description, t.specs.gpus)
        offer_pool = pool(row.region.name, t.name)
        if acc is None or offer_pool.id in seen:
            continue
        seen.add(offer_pool.id)
        out.append(_offer(row.region.name, t, acc, capacity_hint=0))
    return out
