"""The compact placement policy a zone-level coupled plan asks for (``LaunchRequest.interconnect``).

A compact placement policy (a regional resource policy with ``groupPlacementPolicy.collocation
= COLLOCATED``) puts the VMs that name it close together in one zone. ``ensure`` makes the named
policy in the pool's region unless it exists, without ``vmCount`` (the fleet's size changes);
resource policies carry no labels, so the policy's ``description`` marks the fleet
(``owner_mark``), and a policy of that name without the fleet's mark is refused, never used or
changed. The launch names it in every VM's ``resourcePolicies``. ``remove`` (``fleet down``,
through ``GcpProvider.teardown``) deletes the policies marked with the fleet; GCE refuses while a
VM still uses one (``resourceInUseByAnotherResource``), which surfaces as an error so ``down``
is run again. The policy is made before any VM, so a run killed in between leaves only a marked
policy that the rerun reuses and ``down`` removes.

Compute Engine REST reference: resourcePolicies.insert / get / aggregatedList / delete
(https://cloud.google.com/compute/docs/reference/rest/v1/resourcePolicies), regionOperations.wait,
and https://cloud.google.com/compute/docs/instances/use-compact-placement-policies.
"""

from __future__ import annotations

from typing import Any

from fleet.errors import ProviderError
from providers.gcp.launch import request_id


def owner_mark(fleet: str) -> str:
    """The ``description`` that says which fleet made a policy."""
    return f"spotfleet fleet {fleet}: compact placement for a coupled job"


def ensure(api: Any, region: str, name: str, fleet: str) -> str:
    """The compact placement policy ``name`` in ``region``, made for ``fleet`` when missing; its URL."""
    policy = _get(api, region, name)
    if policy is None:
        c = api.compute
        body = c.ResourcePolicy(
            name=name,
            description=owner_mark(fleet),
            group_placement_policy=c.ResourcePolicyGroupPlacementPolicy(collocation="COLLOCATED"),
        )
        try:
            op = api.call(
                api.resource_policies.insert_unary,
                region=region,
                what="create a compact placement policy",
                request={
                    "project": api.project,
                    "region": region,
                    "resource_policy_resource": body,
                    "request_id": request_id(fleet, "policy", region, name),
                },
            )
            api.wait_region(region, op, what=f"create placement policy {name}")
        except ProviderError as err:
            if err.code != "alreadyExists":
                raise
        policy = _get(api, region, name)
        if policy is None:
            raise ProviderError(
                "gcp", f"placement policy {name} was created but cannot be read back", region=region, code="notFound"
            )
    if policy.description != owner_mark(fleet):
        raise ProviderError(
            "gcp",
            f"resource policy {name} exists but fleet {fleet} did not create it (its "
            "description is not this fleet's mark); delete or rename it, or rename the fleet",
            region=region,
            code="POLICY_NOT_OURS",
        )
    if not policy.group_placement_policy or policy.group_placement_policy.collocation != "COLLOCATED":
        raise ProviderError(
            "gcp",
            f"resource policy {name} is not a compact placement policy; delete it and run again",
            region=region,
            code="POLICY_NOT_COMPACT",
        )
    return f"projects/{api.project}/regions/{region}/resourcePolicies/{name}"


def remove(api: Any, fleet: str) -> list[str]:
    """Delete the policies in every region marked with ``fleet``; their names. Others are never touched."""
    pages = api.pages(
        api.resource_policies.aggregated_list,
        kind="compute#resourcePolicyAggregatedList",
        what="list resource policies",
        request={"project": api.project},
    )
    mine = sorted(
        (scope.rsplit("/", 1)[-1], p.name)
        for page in pages
        for scope, scoped in page.items.items()
        for p in scoped.resource_policies
        if p.description == owner_mark(fleet)
    )
    for region, name in mine:
        try:
            op = api.call(
                api.resource_policies.delete_unary,
                region=region,
                what="delete a placement policy",
                request={"project": api.project, "region": region, "resource_policy": name},
            )
            api.wait_region(region, op, what=f"delete placement policy {name}")
        except ProviderError as err:
            if err.code != "notFound":
                raise
    return [name for _, name in mine]


def _get(api: Any, region: str, name: str) -> Any:
    try:
        return api.call(
            api.resource_policies.get,
            region=region,
            read=True,
            what="read a placement policy",
            request={"project": api.project, "region": region, "resource_policy": name},
        )
    except ProviderError as err:
        if err.code == "notFound" or "not found" in err.message:
            return None
        raise
