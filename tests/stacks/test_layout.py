"""The pure part of the stacks (no Pulumi needed): names, tags, URIs and plan checks."""

from __future__ import annotations

import pytest

from fleet.errors import FleetError
from fleet.model import PoolKey
from fleet.spec import parse_spec
from stacks.layout import checkpoint_uri, gcp_labels, logical_name
from stacks.ownership import REBALANCER_OWNS, ignore_changes

SPEC = "name: demo\ncapacity: {gpus: 8, accelerators: [H100]}\n"


def test_logical_names_depend_on_the_pool_only():
    pool = PoolKey.from_id("gcp/us-central1/us-central1-a/a3-highgpu-8g/spot")
    assert logical_name(pool) == f"gcp-{pool.short_hash}" == logical_name(PoolKey.from_id(pool.id))
    other = PoolKey.from_id("gcp/us-central1/us-central1-a/a3-highgpu-8g/on-demand")
    assert logical_name(other) != logical_name(pool)


@pytest.mark.parametrize(
    "store,uri",
    [
        ("s3", "s3://demo-checkpoints/demo"),
        ("gcs", "gs://demo-checkpoints/demo"),
        ("azure", "az://demo-checkpoints@demockpt/demo"),
        ("local", ""),
    ],
)
def test_checkpoint_uri_is_the_one_nodes_get_from_fleet_up(store, uri):
    spec = parse_spec(SPEC + f"checkpoint: {{provider: {store}}}\n")
    assert checkpoint_uri(spec) == uri


def test_gcp_labels_carry_the_fleet_tags_in_label_syntax():
    tags = {
        "spotfleet:fleet": "demo",
        "spotfleet:pool": "gcp/us-central1/us-central1-a/a3-highgpu-8g/spot",
        "spotfleet:plan": "abc123",
    }
    labels = gcp_labels(tags)
    assert labels == {
        "spotfleet_fleet": "demo",
        "spotfleet_plan": "abc123",
        "spotfleet_pool_hash": PoolKey.from_id(tags["spotfleet:pool"]).short_hash,
    }


def test_only_spot_holders_ignore_counts():
    for kind, paths in REBALANCER_OWNS.items():
        assert ignore_changes(kind, spot=True) == list(paths)
        assert ignore_changes(kind, spot=False) == []
    assert ignore_changes("aws:s3/bucket:Bucket", spot=True) == []


def test_a_plan_for_another_fleet_is_refused():
    from fleet.model import Plan, PlanTotals
    from stacks.layout import pools

    spec = parse_spec(SPEC)
    totals = PlanTotals(
        gpus=0,
        weighted_gpus=0,
        target_weighted_gpus=8,
        on_demand_weighted_gpus=0,
        price_per_hour=0,
        true_cost_per_hour=0,
        true_cost_per_weighted_gpu_hour=0,
        expected_interruptions_per_day=0,
    )
    plan = Plan(fleet="other", spec_hash=spec.spec_hash(), strategy="x", allocations=(), totals=totals)
    with pytest.raises(FleetError, match="plan is for fleet 'other'"):
        pools(spec, plan)


def test_a_stack_refuses_to_ship_spotfleet_and_names_the_setting():
    from fleet.model import Plan, PlanTotals
    from stacks.layout import pools

    spec = parse_spec(SPEC)  # node.spotfleet: ship, the default: its URL would expire in a template
    totals = PlanTotals(
        gpus=0,
        weighted_gpus=0,
        target_weighted_gpus=8,
        on_demand_weighted_gpus=0,
        price_per_hour=0,
        true_cost_per_hour=0,
        true_cost_per_weighted_gpu_hour=0,
        expected_interruptions_per_day=0,
    )
    plan = Plan(fleet="demo", spec_hash=spec.spec_hash(), strategy="x", allocations=(), totals=totals)
    with pytest.raises(FleetError, match="node.spotfleet is 'ship'.*'preinstalled'"):
        pools(spec, plan)
    preinstalled = parse_spec(SPEC + "node: {spotfleet: preinstalled}\n")
    plan = plan.model_copy(update={"spec_hash": preinstalled.spec_hash()})
    assert pools(preinstalled, plan) == []
