"""SpotFleet under Pulumi's mocks: the resources and inputs declared for a multi-cloud plan made
by `fleet plan --out`, and the same pools and counts as the plan the CLI printed."""

from __future__ import annotations

import base64
import json
import math

import pytest

pytest.importorskip("pulumi", reason="the Pulumi SDK is not installed: pip install -e '.[pulumi]'")
pytest.importorskip("pulumi_aws", reason="pulumi-aws is not installed: pip install -e '.[pulumi]'")
pytest.importorskip("pulumi_gcp", reason="pulumi-gcp is not installed: pip install -e '.[pulumi]'")

from harness import declare, of_type, one, reveal  # noqa: E402

from fleet.bootstrap import boot_for, render  # noqa: E402
from fleet.errors import FleetError  # noqa: E402
from fleet.model import LaunchRequest, Market, NodeConfig, Plan, PoolKey, fleet_tags  # noqa: E402
from fleet.spec import load_spec  # noqa: E402
from stacks.fleet import SpotFleet  # noqa: E402
from stacks.layout import logical_name  # noqa: E402

ENV = {"WANDB_PROJECT": "demo", "HF_TOKEN": "hf-secret-value"}
URI = "s3://multi-checkpoints/multi"


@pytest.fixture(scope="module")
def built(multi):
    spec_path, plan_path = multi
    spec, plan = load_spec(spec_path), Plan.from_json(plan_path.read_text())
    declared, fleet = declare(lambda: SpotFleet("multi", spec, plan, env=ENV))
    return spec, plan, declared, fleet


def fleet_up_script(spec, plan, alloc, provider: str) -> str:
    """The start-up script `fleet up` renders for this allocation (the adapters' boot_for)."""
    request = LaunchRequest(
        fleet=spec.name,
        offer=alloc.offer,
        count=alloc.count,
        token="t",
        tags=fleet_tags(spec.name, alloc.offer.pool, plan.id),
        node=NodeConfig(startup=spec.node.startup, env=ENV, checkpoint_uri=URI, spotfleet=spec.node.spotfleet),
    )
    return render(boot_for(provider, request))


def test_plan_covers_every_provider(built):
    _, plan, _, _ = built
    providers = {a.offer.pool.provider for a in plan.allocations if a.count}
    assert {"aws", "gcp"} <= providers
    assert any(a.offer.market is Market.ON_DEMAND for a in plan.allocations if a.offer.pool.provider == "aws")


def test_aws_launch_template_per_pool_with_the_fleet_up_script_and_tags(built):
    spec, plan, declared, _ = built
    aws = [a for a in plan.allocations if a.offer.pool.provider == "aws" and a.count]
    templates = of_type(declared, "aws:ec2/launchTemplate:LaunchTemplate")
    assert sorted(t.name for t in templates) == sorted(logical_name(a.offer.pool) for a in aws)
    for alloc in aws:
        t = one(declared, "aws:ec2/launchTemplate:LaunchTemplate", logical_name(alloc.offer.pool))
        assert t.inputs["instanceType"] == alloc.offer.pool.instance_type
        user_data, secret = reveal(t.inputs["userData"])
        assert secret, "the script holds the resolved HF_TOKEN: it must reach the engine as a secret"
        assert base64.b64decode(user_data).decode() == fleet_up_script(spec, plan, alloc, "aws")
        tags = fleet_tags(spec.name, alloc.offer.pool, plan.id)
        specs = {s["resourceType"]: s["tags"] for s in t.inputs["tagSpecifications"]}
        assert specs["instance"] == tags and specs["volume"] == tags
        assert t.inputs["metadataOptions"]["httpTokens"] == "required"


def test_aws_fleets_split_spot_and_baseline_with_weights(built):
    spec, plan, declared, _ = built
    fleets = {d.name: d for d in of_type(declared, "aws:ec2/fleet:Fleet")}
    for region in {a.offer.pool.region for a in plan.allocations if a.offer.pool.provider == "aws"}:
        for market in Market:
            allocs = [
                a
                for a in plan.allocations
                if a.offer.pool.provider == "aws"
                and a.offer.pool.region == region
                and a.offer.market is market
                and a.count
            ]
            name = f"multi-{region}-{market.value}"
            if not allocs:
                assert name not in fleets
                continue
            f = fleets[name]
            assert f.inputs["type"] == "maintain" and f.inputs["region"] == region
            weights = {a.offer.pool.instance_type: a.offer.gpus * spec.weight(a.offer.accelerator) for a in allocs}
            target = math.ceil(round(sum(a.count * weights[a.offer.pool.instance_type] for a in allocs), 6))
            cap = f.inputs["targetCapacitySpecification"]
            assert cap["totalTargetCapacity"] == target
            assert cap["defaultTargetCapacityType"] == market.value
            overrides = [o for c in f.inputs["launchTemplateConfigs"] for o in c["overrides"]]
            assert sorted(o["subnetId"] for o in overrides) == sorted(
                f"subnet-{a.offer.pool.zone.replace('-az', '')}" for a in allocs
            )
            assert all(o["weightedCapacity"] == weights[o["instanceType"]] for o in overrides)
            if market is Market.SPOT:
                assert cap["spotTargetCapacity"] == target
                assert f.inputs["spotOptions"]["allocationStrategy"] == "price-capacity-optimized"
            else:
                assert cap["onDemandTargetCapacity"] == target
                assert "spotOptions" not in f.inputs


def test_s3_bucket_private_encrypted_with_lifecycle_and_protected(built):
    _, _, declared, fleet = built
    bucket = one(declared, "aws:s3/bucket:Bucket")
    assert bucket.inputs["bucket"] == "multi-checkpoints"
    assert bucket.protect and bucket.retain_on_delete
    block = one(declared, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert all(
        block.inputs[k] is True
        for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    sse = one(declared, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    assert sse.inputs["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"
    rules = {
        r["id"]: r
        for r in one(declared, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration").inputs["rules"]
    }
    assert rules["expire-checkpoints"]["expiration"]["days"] == 14
    assert rules["abort-incomplete-uploads"]["abortIncompleteMultipartUpload"]["daysAfterInitiation"] == 1


def test_node_role_reaches_only_the_bucket_prefix(built):
    _, _, declared, _ = built
    policy = json.loads(one(declared, "aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    objects, listing = policy["Statement"]
    assert objects["Resource"] == "arn:mock:multi-checkpoints/multi/*"
    assert listing["Resource"] == "arn:mock:multi-checkpoints"
    assert listing["Condition"]["StringLike"]["s3:prefix"] == ["multi/*", "multi"]
    assert one(declared, "aws:iam/instanceProfile:InstanceProfile")


def test_gcp_spot_templates_and_groups_per_pool(built):
    spec, plan, declared, _ = built
    gcp = [a for a in plan.allocations if a.offer.pool.provider == "gcp" and a.count]
    assert gcp
    for alloc in gcp:
        name = logical_name(alloc.offer.pool)
        t = one(declared, "gcp:compute/instanceTemplate:InstanceTemplate", name)
        assert t.inputs["machineType"] == alloc.offer.pool.instance_type
        assert t.inputs["scheduling"]["provisioningModel"] == "SPOT"
        assert t.inputs["scheduling"]["instanceTerminationAction"] == "DELETE"
        metadata, secret = reveal(t.inputs["metadata"])
        script = metadata["startup-script"]
        assert secret and script == fleet_up_script(spec, plan, alloc, "gcp")
        assert "export HF_TOKEN=hf-secret-value" in script
        assert metadata["spotfleet-pool"] == alloc.offer.pool.id
        assert t.inputs["labels"] == {
            "spotfleet_fleet": "multi",
            "spotfleet_pool_hash": alloc.offer.pool.short_hash,
            "spotfleet_plan": plan.id,
        }
        g = one(declared, "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager", name)
        assert g.inputs["targetSize"] == alloc.count
        assert g.inputs["distributionPolicyZones"] == [alloc.offer.pool.zone]
        assert g.inputs["region"] == alloc.offer.pool.region
    assert one(declared, "gcp:serviceaccount/account:Account").inputs["project"] == "demo-project"


def test_without_secret_references_the_script_is_plain(multi):
    spec = load_spec(multi[0])
    plain = spec.model_copy(update={"node": spec.node.model_copy(update={"env": {"WANDB_PROJECT": "demo"}})})
    plan = Plan.from_json(multi[1].read_text())
    plan = plan.model_copy(update={"spec_hash": plain.spec_hash()})
    declared, _ = declare(lambda: SpotFleet("multi", plain, plan, env={"WANDB_PROJECT": "demo"}))
    for t in of_type(declared, "aws:ec2/launchTemplate:LaunchTemplate"):
        user_data, secret = reveal(t.inputs["userData"])
        assert not secret and "WANDB_PROJECT=demo" in base64.b64decode(user_data).decode()


def test_same_plan_same_pools_and_counts_as_the_cli(built, multi):
    _, plan, declared, fleet = built
    printed = json.loads(multi[1].read_text())
    cli_counts = {
        "/".join(
            (
                a["offer"]["pool"]["provider"],
                a["offer"]["pool"]["region"],
                a["offer"]["pool"]["zone"] or "-",
                a["offer"]["pool"]["instance_type"],
                a["offer"]["pool"]["market"],
            )
        ): a["count"]
        for a in printed["allocations"]
        if a["count"]
    }
    assert fleet.counts == cli_counts == plan.counts()
    declared_counts = {}
    for g in of_type(declared, "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager"):
        declared_counts[g.name] = g.inputs["targetSize"]
    for v in of_type(declared, "pulumi-python:dynamic:Resource"):
        declared_counts[v.name] = v.inputs["count"]
    for pool_id, count in cli_counts.items():
        pool = PoolKey.from_id(pool_id)
        if pool.provider in ("gcp", "vast"):
            assert declared_counts.pop(logical_name(pool)) == count
    assert not declared_counts
    assert fleet.plan_id == printed["id"]


def test_new_counts_update_in_place_under_the_same_names(built):
    spec, plan, declared, _ = built
    doubled = plan.model_copy(
        update={"allocations": tuple(a.model_copy(update={"count": a.count * 2}) for a in plan.allocations)}
    )
    again, _ = declare(lambda: SpotFleet("multi", spec, doubled, env=ENV))
    assert sorted((d.type, d.name) for d in again) == sorted((d.type, d.name) for d in declared)


def test_a_plan_for_another_spec_is_refused(built):
    spec, plan, _, _ = built
    other = spec.model_copy(update={"capacity": spec.capacity.model_copy(update={"gpus": 65})})
    with pytest.raises(FleetError, match="another version of spec"):
        declare(lambda: SpotFleet("multi", other, plan))
