"""Who owns what between Pulumi and the scheduled rebalancer (pure, no Pulumi).

Pulumi owns the shape of the fleet: launch templates, instance templates, groups and fleets,
buckets, identities, and the on-demand baseline. The rebalancer (``fleet rebalance``) owns how
many spot nodes run and which ones: it changes spot counts and replaces interrupted nodes. So
every resource that holds a spot count declares that count in ``ignoreChanges``, and no
resource that holds the baseline does: ``pulumi up`` never undoes the rebalancer's work, and
never lets the baseline drift.

:data:`REBALANCER_OWNS` is the rule, per Pulumi resource type: the input paths the rebalancer
may change. :func:`ignore_changes` is what a stack passes as ``ignore_changes``.
"""

from __future__ import annotations

#: Pulumi type -> input paths (Pulumi's camelCase property paths) the rebalancer changes.
REBALANCER_OWNS: dict[str, tuple[str, ...]] = {
    "aws:ec2/fleet:Fleet": (
        "targetCapacitySpecification.totalTargetCapacity",
        "targetCapacitySpecification.spotTargetCapacity",
    ),
    "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager": ("targetSize",),
    "azure-native:compute:VirtualMachineScaleSet": ("sku.capacity",),
    "pulumi-python:dynamic:Resource": ("count",),
}

#: What Pulumi alone owns (documentation and the ownership test read it).
PULUMI_OWNS = (
    "launch templates and instance templates (image, start-up script, tags)",
    "fleets, groups and scale sets themselves, their pools, weights and strategy",
    "the on-demand baseline (count or target)",
    "checkpoint buckets, their lifecycle and protection",
    "roles, instance profiles, service accounts and managed identities",
)


def ignore_changes(resource_type: str, *, spot: bool) -> list[str]:
    """``ignore_changes`` for a resource of ``resource_type``: the rebalancer's count paths when
    the resource holds spot nodes, nothing when it holds only the on-demand baseline."""
    return list(REBALANCER_OWNS.get(resource_type, ())) if spot else []
