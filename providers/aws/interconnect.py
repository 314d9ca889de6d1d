"""The cluster placement group a zone-level coupled plan asks for (``LaunchRequest.interconnect``).

A cluster placement group packs instances of one Availability Zone onto a low-latency,
high-bandwidth network segment. ``ensure`` creates the named group (strategy ``cluster``,
tagged with the fleet) in the pool's region unless it exists; a group of that name that does
not carry the fleet's tag is refused, never used or changed. The launch names it in every
CreateFleet override's ``Placement.GroupName``. ``remove`` (``fleet down``, through
``AwsProvider.teardown``) deletes the groups tagged with the fleet; EC2 refuses to delete a
group that still holds instances (``InvalidPlacementGroup.InUse``), which surfaces as an error
so ``down`` is run again once they are gone. The group is made before CreateFleet, so a run
killed in between leaves only a tagged, empty group that the rerun reuses and ``down`` removes.

EC2 API reference: CreatePlacementGroup, DescribePlacementGroups, DeletePlacementGroup
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreatePlacementGroup.html and the
pages beside it), ``Placement`` of FleetLaunchTemplateOverridesRequest, and the error codes
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html).
"""

from __future__ import annotations

from typing import Any

from fleet.errors import MalformedResponseError, ProviderError
from fleet.model import TAG_FLEET
from providers.aws import instances as ec2i
from providers.aws.session import Aws

DUPLICATE = "InvalidPlacementGroup.Duplicate"
UNKNOWN = "InvalidPlacementGroup.Unknown"


def ensure(aws: Aws, region: str, name: str, fleet: str) -> None:
    """The cluster placement group ``name`` in ``region``, created for ``fleet`` when missing."""
    found = _described(aws, region, name)
    if found is None:
        try:
            aws.call(
                "ec2",
                region,
                "create_placement_group",
                GroupName=name,
                Strategy="cluster",
                TagSpecifications=[{"ResourceType": "placement-group", "Tags": [{"Key": TAG_FLEET, "Value": fleet}]}],
            )
            return
        except ProviderError as err:
            if err.code != DUPLICATE:
                raise
            found = _described(aws, region, name)  # made meanwhile by a racing launch
            if found is None:
                raise
    if ec2i.tags_of(found).get(TAG_FLEET) != fleet:
        raise ProviderError(
            "aws",
            f"placement group {name} exists but fleet {fleet} did not create it (no "
            f"{TAG_FLEET}={fleet} tag); delete or rename it, or rename the fleet",
            region=region,
            code="PlacementGroupNotOurs",
        )
    if found.get("Strategy") != "cluster":
        raise ProviderError(
            "aws",
            f"placement group {name} has strategy {found.get('Strategy')!r}, not cluster; delete it and run again",
            region=region,
            code="PlacementGroupNotCluster",
        )


def remove(aws: Aws, region: str, fleet: str) -> list[str]:
    """Delete the placement groups in ``region`` tagged with ``fleet``; their names. Groups
    without the tag are never touched; one already gone is fine."""
    answer = aws.call(
        "ec2", region, "describe_placement_groups", Filters=[{"Name": f"tag:{TAG_FLEET}", "Values": [fleet]}]
    )
    groups = _groups(answer, region)
    names = sorted(g["GroupName"] for g in groups if ec2i.tags_of(g).get(TAG_FLEET) == fleet and g.get("GroupName"))
    for name in names:
        try:
            aws.call("ec2", region, "delete_placement_group", GroupName=name)
        except ProviderError as err:
            if err.code != UNKNOWN:
                raise
    return names


def _described(aws: Aws, region: str, name: str) -> dict[str, Any] | None:
    try:
        answer = aws.call("ec2", region, "describe_placement_groups", GroupNames=[name])
    except ProviderError as err:
        if err.code == UNKNOWN:
            return None
        raise
    groups = [g for g in _groups(answer, region) if g.get("GroupName") == name]
    return groups[0] if groups else None


def _groups(answer: dict[str, Any], region: str) -> list[dict[str, Any]]:
    groups = answer.get("PlacementGroups")
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise MalformedResponseError(
            "aws", "describe placement groups", detail="no list of PlacementGroups", region=region
        )
    return groups
