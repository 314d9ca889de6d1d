"""The ownership rule between Pulumi and the rebalancer, checked on what a stack declares:
every resource that holds spot nodes ignores exactly the counts the rebalancer changes (and
those paths exist in its inputs); nothing else ignores anything, so the baseline, templates,
buckets and identities never drift from the program; data is protected."""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("pulumi", reason="the Pulumi SDK is not installed: pip install -e '.[pulumi]'")
pytest.importorskip("pulumi_aws", reason="pulumi-aws is not installed: pip install -e '.[pulumi]'")
pytest.importorskip("pulumi_gcp", reason="pulumi-gcp is not installed: pip install -e '.[pulumi]'")

from harness import declare, reveal  # noqa: E402
from support.stack_specs import AZURE, fleet_plan  # noqa: E402

from fleet.model import Market, Plan, PoolKey  # noqa: E402
from fleet.spec import load_spec  # noqa: E402
from stacks.fleet import SpotFleet  # noqa: E402
from stacks.layout import logical_name  # noqa: E402
from stacks.ownership import REBALANCER_OWNS  # noqa: E402

DATA_TYPES = (
    "aws:s3/bucket:Bucket",
    "gcp:storage/bucket:Bucket",
    "azure-native:storage:StorageAccount",
    "azure-native:storage:BlobContainer",
)


def holds_spot(d, plan: Plan) -> bool:
    """Whether declared resource ``d`` holds spot nodes, read from its inputs and the plan."""
    if d.type == "aws:ec2/fleet:Fleet":
        return d.inputs["targetCapacitySpecification"]["defaultTargetCapacityType"] == "spot"
    if d.type == "azure-native:compute:VirtualMachineScaleSet":
        return d.inputs["sku"]["capacity"] > d.inputs["priorityMixPolicy"]["baseRegularPriorityCount"]
    by_name = {logical_name(PoolKey.from_id(p)): PoolKey.from_id(p) for p in plan.counts()}
    return by_name[d.name].market is Market.SPOT


def has_path(inputs: dict, path: str) -> bool:
    node = inputs
    for part in path.split("."):
        node, _ = reveal(node)
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def check_rule(declared, plan: Plan) -> int:
    counted = 0
    for d in declared:
        if d.type in REBALANCER_OWNS:
            spot = holds_spot(d, plan)
            assert d.ignore_changes == (list(REBALANCER_OWNS[d.type]) if spot else []), (d.type, d.name)
            assert all(has_path(d.inputs, path) for path in d.ignore_changes), (d.type, d.name)
            counted += 1
        else:
            assert d.ignore_changes == [], f"{d.type} {d.name} belongs to Pulumi and must not ignore changes"
        if d.type in DATA_TYPES:
            assert d.protect and d.retain_on_delete, f"{d.type} {d.name} holds checkpoints: protect and retain it"
    return counted


def test_multi_cloud_stack_follows_the_rule(multi):
    spec, plan = load_spec(multi[0]), Plan.from_json(multi[1].read_text())
    declared, _ = declare(lambda: SpotFleet("multi", spec, plan, env={"HF_TOKEN": "x", "WANDB_PROJECT": "demo"}))
    counted = check_rule(declared, plan)
    fleets = [d for d in declared if d.type == "aws:ec2/fleet:Fleet"]
    assert any(not holds_spot(d, plan) for d in fleets), "the spec's baseline is an on-demand EC2 Fleet"
    assert counted == len(fleets) + sum(1 for p in plan.counts() if not p.startswith("aws/"))


@pytest.mark.skipif(
    importlib.util.find_spec("pulumi_azure_native") is None,
    reason="pulumi-azure-native is not installed (it is not in CI's install)",
)
def test_azure_stack_follows_the_rule(tmp_path):
    spec_path, plan_path = fleet_plan(tmp_path, AZURE)
    spec, plan = load_spec(spec_path), Plan.from_json(plan_path.read_text())
    declared, _ = declare(lambda: SpotFleet("azfleet", spec, plan, env={}))
    assert check_rule(declared, plan) == 1
