"""The proximity placement group a zone-level coupled plan asks for (``LaunchRequest.interconnect``).

A proximity placement group keeps the VMs that name it physically close (low latency) in one
region. ``ensure`` creates the named group (``Standard``, tagged with the fleet) in the fleet's
resource group and the pool's region unless it exists; one of that name without the fleet's
tag, or in another region, is refused, never used or changed. Each VM names it in
``properties.proximityPlacementGroup.id``. ``remove`` (``fleet down``, through
``AzureProvider.teardown``) deletes the fleet's groups in the regions where none of its VMs is
left; Azure refuses to delete one that still holds VMs, which surfaces as an error so ``down``
is run again. The group is made before any VM, so a run killed in between leaves only a tagged,
empty group that the rerun reuses and ``down`` removes.

ARM reference: "Proximity Placement Groups" (Create Or Update, Get, List By Resource Group,
Delete), https://learn.microsoft.com/rest/api/compute/proximity-placement-groups, and the
``proximityPlacementGroup`` of a virtual machine's properties.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from fleet.errors import InstanceNotFoundError, ProviderError
from fleet.model import TAG_FLEET
from providers.azure.arm import Arm, wire


def ensure(arm: Arm, rg: str, region: str, name: str, fleet: str) -> str:
    """The proximity placement group ``name`` in ``region``, made for ``fleet`` when missing; its id."""
    ops = arm.compute.proximity_placement_groups
    found = _get(arm, rg, name)
    if found is None:
        body = {
            "location": region,
            "tags": {TAG_FLEET: fleet},
            "properties": {"proximityPlacementGroupType": "Standard"},
        }
        found = wire(arm.call(lambda: ops.create_or_update(rg, name, body), f"create proximity placement group {name}"))
    if (found.get("tags") or {}).get(TAG_FLEET) != fleet:
        raise ProviderError(
            "azure",
            f"proximity placement group {name} exists but fleet {fleet} did not create it "
            f"(no {TAG_FLEET}={fleet} tag); delete or rename it, or rename the fleet",
            region=region,
            code="PlacementGroupNotOurs",
        )
    if str(found.get("location") or "").lower() != region.lower():
        raise ProviderError(
            "azure",
            f"proximity placement group {name} is in {found.get('location')}, not {region}; delete it and run again",
            region=region,
            code="PlacementGroupElsewhere",
        )
    return str(found["id"])


def remove(arm: Arm, rg: str, fleet: str, busy: Collection[str] = ()) -> list[str]:
    """Delete ``fleet``'s proximity placement groups in ``rg`` outside the regions ``busy`` (where
    its VMs still run); their names. Groups without the fleet's tag are never touched."""
    ops = arm.compute.proximity_placement_groups
    try:
        groups = arm.call(
            lambda: [wire(g) for g in ops.list_by_resource_group(rg)], f"list proximity placement groups in {rg}"
        )
    except InstanceNotFoundError:  # no resource group: nothing of ours
        return []
    names = sorted(
        g["name"]
        for g in groups
        if (g.get("tags") or {}).get(TAG_FLEET) == fleet and str(g.get("location") or "") not in busy
    )
    for name in names:
        arm.call(lambda name=name: ops.delete(rg, name), f"delete proximity placement group {name}")
    return names


def _get(arm: Arm, rg: str, name: str) -> dict[str, Any] | None:
    try:
        return wire(
            arm.call(
                lambda: arm.compute.proximity_placement_groups.get(rg, name), f"find proximity placement group {name}"
            )
        )
    except InstanceNotFoundError:
        return None
