"""Azure part of a SpotFleet: a Flexible scale set per region, the checkpoint store, an identity.

Per region one Virtual Machine Scale Set in Flexible orchestration whose ``skuProfile`` lists
every planned VM size of that region (ranked by planned count, allocation strategy from the
spec) and whose ``priorityMixPolicy`` keeps the on-demand baseline as regular-priority VMs
(``baseRegularPriorityCount``) and everything above it as Spot (eviction: delete). The capacity
(``sku.capacity``) is the region's planned count; it belongs to the rebalancer once spot is in
the mix (``stacks.ownership``), the baseline belongs to Pulumi. One scale set holds several
sizes, so its nodes carry the region's mix pool id (``azure/<region>/-/mix/spot``); the VM size
on each VM names its exact pool. The VMs boot the adapter's image (``providers.azure.launch``:
Ubuntu-HPC 22.04 with the NVIDIA driver, or ``node.image``) and sign in with ``node.ssh_key`` or,
without one, the fleet's own key pair (``providers.kit.ssh_keys``), as the adapter's VMs do.

With ``checkpoint.provider: azure``: a storage account (HTTPS only, no public blob access,
TLS 1.2) with a private container (both protected, retained on delete), a management policy
that expires old checkpoints, and a "Storage Blob Data Contributor" role for the nodes'
user-assigned managed identity, limited to the container.
"""

from __future__ import annotations

import dataclasses
import os
import re

import pulumi
import pulumi_azure_native as azure

from fleet.bootstrap import render_base64
from fleet.spec import FleetSpec, Strategy
from providers.azure.launch import ADMIN_USER, image_reference
from providers.kit.ssh_keys import default_home, fleet_public_key
from stacks.layout import PoolPlan, azure_account, by_region
from stacks.ownership import ignore_changes

VMSS_TYPE = "azure-native:compute:VirtualMachineScaleSet"
#: Spec strategy -> skuProfile allocation strategy.
SKU_STRATEGY = {
    Strategy.PRICE_CAPACITY_OPTIMIZED: "CapacityOptimized",
    Strategy.CAPACITY_OPTIMIZED: "CapacityOptimized",
    Strategy.LOWEST_PRICE: "LowestPrice",
    Strategy.DIVERSIFIED: "Prioritized",
}
BLOB_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"


class AzureFleet(pulumi.ComponentResource):
    """The Azure pools of a plan. Outputs: ``group_ids`` (region -> scale set id), ``bucket_uri``."""

    def __init__(self, name: str, spec: FleetSpec, pools: list[PoolPlan], opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotfleet:index:AzureFleet", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        settings = spec.provider_settings("azure")
        regions = by_region(pools)
        location = spec.checkpoint.region or next(iter(regions), "eastus")
        if settings and settings.resource_group:
            group_name: pulumi.Input[str] = settings.resource_group
        else:
            group_name = azure.resources.ResourceGroup(
                f"{spec.name}-fleet", location=location, tags={"spotfleet:fleet": spec.name}, opts=child
            ).name
        identity = azure.managedidentity.UserAssignedIdentity(
            f"{spec.name}-node",
            resource_group_name=group_name,
            location=location,
            tags={"spotfleet:fleet": spec.name},
            opts=child,
        )
        self.bucket_uri: pulumi.Output[str] | str = ""
        if spec.checkpoint.provider == "azure":
            self.bucket_uri = _storage(spec, group_name, location, identity, child)
        self.group_ids: dict[str, pulumi.Output[str]] = {}
        for region, planned in regions.items():
            self.group_ids[region] = _scale_set(spec, region, planned, group_name, identity, self).id
        self.register_outputs({"group_ids": self.group_ids, "bucket_uri": self.bucket_uri})


def mix_pool(region: str) -> str:
    return f"azure/{region}/-/mix/spot"


def _eviction_policy(spec: FleetSpec) -> str:
    """``providers.azure.eviction_policy`` (Delete unless the spec says Deallocate)."""
    settings = spec.provider_settings("azure")
    return settings.eviction_policy if settings else "Delete"


def _scale_set(
    spec: FleetSpec, region: str, planned: list[PoolPlan], group_name, identity, parent: pulumi.Resource
) -> azure.compute.VirtualMachineScaleSet:
    ranked = sorted(planned, key=lambda p: (-p.count, p.pool.instance_type))
    sizes = list(dict.fromkeys(p.pool.instance_type for p in ranked))
    baseline = sum(p.count for p in planned if not p.spot)
    total = sum(p.count for p in planned)
    boot = dataclasses.replace(ranked[0].boot, pool=mix_pool(region))
    tags = {**ranked[0].tags, "spotfleet:pool": mix_pool(region)}
    custom_data = render_base64(boot)
    # the adapter's image (Ubuntu-HPC with the NVIDIA driver, or node.image) and sign-in key (node.ssh_key,
    # else the fleet's own pair in the state folder: Azure refuses a Linux VM without password or key)
    ssh_key = spec.node.ssh_key.strip() or fleet_public_key(default_home(os.environ), spec.name)
    ssh = [{"path": f"/home/{ADMIN_USER}/.ssh/authorized_keys", "key_data": ssh_key}]
    return azure.compute.VirtualMachineScaleSet(
        f"{spec.name}-{region}",
        resource_group_name=group_name,
        location=region,
        orchestration_mode="Flexible",
        platform_fault_domain_count=1,
        single_placement_group=False,
        sku={"name": "Mix", "capacity": total},
        sku_profile={
            "vm_sizes": [{"name": s, "rank": i} for i, s in enumerate(sizes)],
            "allocation_strategy": SKU_STRATEGY[spec.strategy],
        },
        priority_mix_policy={"base_regular_priority_count": baseline, "regular_priority_percentage_above_base": 0},
        identity={"type": "UserAssigned", "user_assigned_identities": [identity.id]},
        virtual_machine_profile={
            "priority": "Spot",
            "eviction_policy": _eviction_policy(spec),
            "billing_profile": {"max_price": -1},
            "os_profile": {
                "computer_name_prefix": re.sub(r"[^a-z0-9-]", "", spec.name)[:9],
                "admin_username": ADMIN_USER,
                "custom_data": pulumi.Output.secret(custom_data) if ranked[0].secret else custom_data,
                "linux_configuration": {"disable_password_authentication": True, "ssh": {"public_keys": ssh}},
            },
            "storage_profile": {
                "image_reference": image_reference(spec.node.image),
                "os_disk": {"create_option": "FromImage", "disk_size_gb": 200, "delete_option": "Delete"},
            },
            "scheduled_events_profile": {
                "terminate_notification_profile": {"enable": True, "not_before_timeout": "PT5M"}
            },
        },
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent, ignore_changes=ignore_changes(VMSS_TYPE, spot=baseline < total)),
    )


def _storage(spec: FleetSpec, group_name, location: str, identity, child: pulumi.ResourceOptions) -> pulumi.Output[str]:
    keep = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=True, retain_on_delete=True))
    account_name = azure_account(spec)
    account = azure.storage.StorageAccount(
        f"{spec.name}-checkpoints",
        account_name=account_name,
        resource_group_name=group_name,
        location=location,
        kind="StorageV2",
        sku={"name": "Standard_LRS"},
        allow_blob_public_access=False,
        enable_https_traffic_only=True,
        minimum_tls_version="TLS1_2",
        tags={"spotfleet:fleet": spec.name},
        opts=keep,
    )
    container = azure.storage.BlobContainer(
        f"{spec.name}-checkpoints",
        account_name=account.name,
        container_name=spec.bucket,
        resource_group_name=group_name,
        public_access="None",
        opts=keep,
    )
    prefix = (spec.checkpoint.prefix or spec.name).strip("/")
    rules = (
        [
            {
                "name": "expire-checkpoints",
                "type": "Lifecycle",
                "enabled": True,
                "definition": {
                    "filters": {"blob_types": ["blockBlob"], "prefix_match": [f"{spec.bucket}/{prefix}/"]},
                    "actions": {
                        "base_blob": {"delete": {"days_after_modification_greater_than": spec.checkpoint.expire_days}}
                    },
                },
            }
        ]
        if spec.checkpoint.expire_days
        else []
    )
    if rules:
        azure.storage.ManagementPolicy(
            f"{spec.name}-checkpoints",
            account_name=account.name,
            resource_group_name=group_name,
            management_policy_name="default",
            policy={"rules": rules},
            opts=child,
        )
    azure.authorization.RoleAssignment(
        f"{spec.name}-checkpoints",
        principal_id=identity.principal_id,
        principal_type="ServicePrincipal",
        role_definition_id=f"/providers/Microsoft.Authorization/roleDefinitions/{BLOB_CONTRIBUTOR}",
        scope=container.id,
        opts=child,
    )
    return container.name.apply(lambda c: f"az://{c}@{account_name}/{prefix}")
