"""A zone-level coupled plan applied on AWS (the real adapter and executor, boto3 over HTTP, moto
behind the EC2 proxy, which answers placement groups from the EC2 API reference): every node
joins the fleet's one cluster placement group, a second apply reuses it, and teardown (what
``fleet down`` runs once nothing is left) deletes it, only it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fleet.model import TAG_FLEET, Allocation, Market, PlacementChoice, Plan, PlanTotals, interconnect_group
from fleet.planning.placement import INTERCONNECT
from fleet.provisioning.executor import apply
from fleet.state import open_store
from providers.aws.settings import AwsSettings
from providers.base import OfferQuery

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

import aws_world  # noqa: E402

REGION = "us-east-1"


@pytest.fixture
def aws(monkeypatch, tmp_path):
    world = aws_world.fresh()
    for key, value in {**world.env, "SPOTFLEET_CACHE_DIR": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    from providers.aws.provider import AwsProvider
    from providers.aws.session import Aws

    return world, AwsProvider(AwsSettings(regions=[REGION], ami=aws_world.MOTO_AMI), aws=Aws(retry_delays=(0.01, 0.02)))


def zone_plan(provider, fleet: str, counts: tuple[int, int], interconnect: bool = True) -> Plan:
    """Two spot pools of one zone, as a zone-level coupled plan names them."""
    spot = sorted(
        (o for o in provider.list_offers(OfferQuery(regions=(REGION,))) if o.market is Market.SPOT),
        key=lambda o: o.pool.id,
    )
    zone = spot[0].pool.zone
    offers = [o for o in spot if o.pool.zone == zone][:2]
    assert len(offers) == 2
    allocs = tuple(
        Allocation(offer=o, count=n, weighted_gpus=float(n * o.gpus), true_cost_per_hour=n * o.price_per_hour)
        for o, n in zip(offers, counts)
    )
    gpus = sum(a.count * a.offer.gpus for a in allocs)
    price = sum(a.true_cost_per_hour for a in allocs)
    totals = PlanTotals(
        gpus=gpus,
        weighted_gpus=gpus,
        target_weighted_gpus=gpus,
        on_demand_weighted_gpus=0,
        price_per_hour=price,
        true_cost_per_hour=price,
        true_cost_per_weighted_gpu_hour=1.0,
        expected_interruptions_per_day=0.0,
    )
    domain = f"aws/{REGION}/{zone}"
    choice = PlacementChoice(
        level="zone",
        domain=domain,
        metric="true cost $/h",
        objective=price,
        domains=1,
        solved=1,
        interconnect=INTERCONNECT["aws"] if interconnect else "",
    )
    return Plan(fleet=fleet, spec_hash="test", strategy="hand", allocations=allocs, totals=totals, placement=choice)


def test_a_zone_level_coupled_plan_launches_into_one_cluster_group_that_down_removes(aws, tmp_path):
    world, provider = aws
    store = open_store(str(tmp_path / "state.db"))
    plan = zone_plan(provider, "alpha", (2, 1))
    other = zone_plan(provider, "beta", (1, 1))
    try:
        report = apply(plan, {"aws": provider}, store)
        assert len(report.launched) == 3 and report.ok, report
        apply(other, {"aws": provider}, store)
        name = interconnect_group("alpha", plan.placement.domain)
        groups = world.proxy.placement_groups()
        ours = groups[f"{REGION}/{name}"]
        assert ours["strategy"] == "cluster" and ours["tags"] == {TAG_FLEET: "alpha"}
        alive = sorted(i.id for i in provider.list_instances("alpha"))
        assert sorted(ours["instances"]) == alive and len(alive) == 3
        # a rerun of the same plan launches nothing and makes no second group
        apply(plan, {"aws": provider}, store)
        assert sorted(world.proxy.placement_groups()[f"{REGION}/{name}"]["instances"]) == alive
        assert len(world.proxy.placement_groups()) == 2  # alpha's and beta's
        # while instances run, EC2 refuses to delete the group; once they are gone it goes, beta's stays
        provider.terminate(alive)
        assert name in provider.teardown("alpha")
        left = world.proxy.placement_groups()
        assert f"{REGION}/{name}" not in left
        assert f"{REGION}/{interconnect_group('beta', other.placement.domain)}" in left
    finally:
        store.close()


def test_a_group_still_holding_instances_makes_teardown_fail_to_be_run_again(aws):
    from fleet.errors import ProviderError

    world, provider = aws
    plan = zone_plan(provider, "alpha", (1, 0))
    from fleet.model import LaunchRequest, fleet_tags

    offer = plan.allocations[0].offer
    name = interconnect_group("alpha", plan.placement.domain)
    provider.launch(
        LaunchRequest(
            fleet="alpha",
            offer=offer,
            count=1,
            token="tok-held",
            interconnect=name,
            tags=fleet_tags("alpha", offer.pool),
        )
    )
    with pytest.raises(ProviderError, match="InUse|in use"):
        provider.teardown("alpha")
    assert f"{REGION}/{name}" in world.proxy.placement_groups()


def test_a_plan_without_interconnect_makes_no_group(aws, tmp_path):
    world, provider = aws
    store = open_store(str(tmp_path / "state.db"))
    try:
        apply(zone_plan(provider, "alpha", (1, 1), interconnect=False), {"aws": provider}, store)
        assert world.proxy.placement_groups() == {}
        assert len(provider.list_instances("alpha")) == 2
    finally:
        store.close()
