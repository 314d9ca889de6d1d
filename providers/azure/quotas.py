"""Azure's compute quotas as the planner's ``Quota`` rows, from the usage API of each region.

``GET .../providers/Microsoft.Compute/locations/{region}/usages`` lists vCPU limits and current use
(the whole subscription's). Azure counts Spot VMs against one regional quota,
``lowPriorityCores`` ("Total Regional Low-priority vCPUs"), whatever their family; regular VMs
count against the regional ``cores`` and against their family's quota (``standardNCADSA100v4Family``,
the ``family`` a Resource SKU names for its size). :func:`to_quotas` turns one region's usages into
rows in vCPUs: the Spot one for the spot market, ``cores`` and each family of a GPU size offered
there for on-demand (a family row covers its sizes by name). Rows with a limit of 0 are kept: they
bind. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fleet.model import Market, Quota, QuotaUnit
from providers.azure.offers import GPU_SIZE, _get

SPOT_QUOTA = "lowPriorityCores"
REGIONAL_QUOTA = "cores"


def families(skus: Iterable[Any], region: str) -> dict[str, tuple[str, ...]]:
    """Quota family -> the GPU sizes of that family the SKUs list in ``region``."""
    out: dict[str, set[str]] = {}
    for sku in skus:
        name, family = str(_get(sku, "name") or ""), str(_get(sku, "family") or "")
        locations = {str(x).lower() for x in _get(sku, "locations") or []}
        if family and GPU_SIZE.match(name) and region.lower() in locations:
            out.setdefault(family, set()).add(name)
    return {f: tuple(sorted(sizes)) for f, sizes in out.items()}


def to_quotas(region: str, usages: Iterable[dict[str, Any]], skus: Iterable[Any]) -> list[Quota]:
    """The quota rows of ``region`` from its usages (ARM wire format) and the Resource SKUs."""
    sizes = families(skus, region)
    out: list[Quota] = []
    for usage in usages:
        name = str((usage.get("name") or {}).get("value") or "")
        scope: dict[str, Any]
        if name == SPOT_QUOTA:
            scope = {"market": Market.SPOT}
        elif name == REGIONAL_QUOTA:
            scope = {"market": Market.ON_DEMAND}
        elif name in sizes:
            scope = {"market": Market.ON_DEMAND, "instance_types": sizes[name]}
        else:
            continue
        out.append(
            Quota(
                provider="azure",
                region=region,
                unit=QuotaUnit.VCPUS,
                name=name,
                limit=max(0.0, float(usage.get("limit") or 0)),
                in_use=max(0.0, float(usage.get("currentValue") or 0)),
                **scope,
            )
        )
    return out
