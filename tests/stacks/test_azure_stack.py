"""The Azure component under Pulumi's mocks: one Flexible scale set per region with every planned
size, the on-demand baseline as regular priority, the checkpoint store and the identity."""

from __future__ import annotations

import base64

import pytest

pytest.importorskip("pulumi", reason="the Pulumi SDK is not installed: pip install -e '.[pulumi]'")
pytest.importorskip(
    "pulumi_azure_native",
    reason="pulumi-azure-native is not installed (it is not in CI's install): pip install -e '.[pulumi]'",
)

from harness import declare, of_type, one  # noqa: E402
from support.stack_specs import AZURE, fleet_plan  # noqa: E402

from fleet.bootstrap import NodeBoot, render  # noqa: E402
from fleet.model import Market, Plan  # noqa: E402
from fleet.spec import load_spec  # noqa: E402
from stacks.fleet import SpotFleet  # noqa: E402

VMSS = "azure-native:compute:VirtualMachineScaleSet"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    spec_path, plan_path = fleet_plan(tmp_path_factory.mktemp("azure"), AZURE)
    spec, plan = load_spec(spec_path), Plan.from_json(plan_path.read_text())
    declared, fleet = declare(lambda: SpotFleet("azfleet", spec, plan, env={}))
    return spec, plan, declared, fleet


def test_one_flexible_scale_set_per_region_with_priority_mix_and_sizes(built):
    spec, plan, declared, fleet = built
    allocs = [a for a in plan.allocations if a.count]
    assert {a.offer.pool.provider for a in allocs} == {"azure"}
    baseline = sum(a.count for a in allocs if a.offer.market is Market.ON_DEMAND)
    assert baseline > 0, "the spec asks for an on-demand baseline"
    s = one(declared, VMSS)
    assert s.inputs["orchestrationMode"] == "Flexible"
    assert s.inputs["sku"] == {"name": "Mix", "capacity": sum(a.count for a in allocs)}
    assert s.inputs["priorityMixPolicy"] == {
        "baseRegularPriorityCount": baseline,
        "regularPriorityPercentageAboveBase": 0,
    }
    sizes = [v["name"] for v in s.inputs["skuProfile"]["vmSizes"]]
    assert sorted(sizes) == sorted({a.offer.pool.instance_type for a in allocs})
    profile = s.inputs["virtualMachineProfile"]
    assert profile["priority"] == "Spot" and profile["evictionPolicy"] == "Delete"
    script = base64.b64decode(profile["osProfile"]["customData"]).decode()
    assert script == render(
        NodeBoot(
            fleet="azfleet",
            pool="azure/eastus/-/mix/spot",
            provider="azure",
            command="python train.py",
            checkpoint_uri="az://azfleet-checkpoints@azfleetckpt/azfleet",
            spotfleet="preinstalled",
        )
    )
    assert s.inputs["tags"]["spotfleet:fleet"] == "azfleet" and s.inputs["tags"]["spotfleet:plan"] == plan.id
    assert s.inputs["identity"]["type"] == "UserAssigned"


def test_storage_is_private_protected_with_lifecycle_and_a_scoped_role(built):
    _, _, declared, fleet = built
    account = one(declared, "azure-native:storage:StorageAccount")
    assert account.inputs["allowBlobPublicAccess"] is False and account.inputs["minimumTlsVersion"] == "TLS1_2"
    container = one(declared, "azure-native:storage:BlobContainer")
    assert container.inputs["publicAccess"] == "None"
    assert account.protect and account.retain_on_delete and container.protect and container.retain_on_delete
    [rule] = one(declared, "azure-native:storage:ManagementPolicy").inputs["policy"]["rules"]
    assert rule["definition"]["actions"]["baseBlob"]["delete"]["daysAfterModificationGreaterThan"] == 7
    role = one(declared, "azure-native:authorization:RoleAssignment")
    assert role.inputs["scope"] == "azfleet-checkpoints-id"  # the container, not the account
    assert len(of_type(declared, "azure-native:managedidentity:UserAssignedIdentity")) == 1


def test_the_spec_eviction_policy_reaches_the_scale_set(tmp_path):
    text = AZURE.replace("azure: {regions: [eastus]}", "azure: {regions: [eastus], eviction_policy: Deallocate}")
    spec_path, plan_path = fleet_plan(tmp_path, text)
    spec, plan = load_spec(spec_path), Plan.from_json(plan_path.read_text())
    declared, _ = declare(lambda: SpotFleet("azfleet", spec, plan, env={}))
    assert one(declared, VMSS).inputs["virtualMachineProfile"]["evictionPolicy"] == "Deallocate"
