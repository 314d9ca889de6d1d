"""Simulated quotas of the local cloud: set through `fleet local quota`, reported by
``Provider.quotas()``, enforced on launch with the vendor's quota error, and planned
within by `fleet plan` on the local backend."""

from __future__ import annotations

import json

from click.testing import CliRunner
from support.local_cloud import fleet

from fleet.cli.main import cli
from fleet.model import LaunchRequest, Market, fleet_tags
from providers.base import OfferQuery
from providers.local import LocalCloud

SPEC = """name: quota-demo
backend: local
capacity: {gpus: 32, accelerators: [H100], gpus_per_node: {min: 8, max: 8}}
providers: {gcp: {}}
diversification: {max_pool_share: 0.5}
"""


def _h100_spot(cloud: LocalCloud):
    offers = cloud.provider("gcp").list_offers(OfferQuery(accelerators=("H100",)))
    return max(
        (o for o in offers if o.market is Market.SPOT and o.gpus == 8), key=lambda o: (o.capacity_hint or 0, o.pool.id)
    )


def test_launch_past_a_quota_is_cut_and_answered_as_quota(root):
    cloud = LocalCloud.open(root)
    offer = _h100_spot(cloud)
    assert (
        fleet("local", "quota", f"gcp/{offer.pool.region}", "16", "--market", "spot", "--accelerator", "H100").exit_code
        == 0
    )
    provider = cloud.provider("gcp")
    result = provider.launch(
        LaunchRequest(fleet="q", offer=offer, count=3, token="q1", tags=fleet_tags("q", offer.pool))
    )
    assert len(result.instances) == 2 and result.error_kind == "quota"
    assert result.error_code == "QUOTA_EXCEEDED" and "allows 2 of 3" in result.error_message
    [quota] = provider.quotas()
    assert (quota.region, quota.market, quota.accelerator, quota.limit, quota.in_use) == (
        offer.pool.region,
        Market.SPOT,
        "H100",
        16,
        16,
    )
    again = provider.launch(
        LaunchRequest(fleet="q", offer=offer, count=1, token="q2", tags=fleet_tags("q", offer.pool))
    )
    assert not again.instances and again.error_kind == "quota"
    assert (
        fleet(
            "local", "quota", f"gcp/{offer.pool.region}", "--market", "spot", "--accelerator", "H100", "--remove"
        ).exit_code
        == 0
    )
    assert provider.quotas() == [] and cloud.provider("aws").quotas() == []


def test_plan_on_the_local_backend_stays_within_the_quota(root, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    assert fleet("local", "quota", "gcp", "16", "--market", "spot").exit_code == 0
    result = fleet("plan", str(spec), "--json")
    plan = json.loads(result.stdout)
    spot = sum(a["offer"]["gpus"] * a["count"] for a in plan["allocations"] if a["offer"]["pool"]["market"] == "spot")
    assert spot <= 16 and plan["totals"]["weighted_gpus"] >= 32
    listed = json.loads(fleet("local", "quota", "--json").stdout)
    assert [(q["provider"], q["market"], q["limit"]) for q in listed] == [("gcp", "spot", 16)]


def test_bad_quota_input_is_one_clear_line(root):
    result = CliRunner().invoke(cli, ["local", "quota", "nowhere", "4"])
    assert result.exit_code == 1 and "quota scope 'nowhere' must be a provider or provider/region" in result.output
    result = CliRunner().invoke(cli, ["local", "quota", "gcp"])
    assert result.exit_code == 1 and "give the quota in GPUs" in result.output


def test_up_launches_within_the_quota(root, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    assert fleet("local", "quota", "gcp", "16", "--market", "spot").exit_code == 0
    result = fleet("up", str(spec), "--yes", "--json")
    assert result.exit_code == 0, result.output
    alive = [i for i in LocalCloud.open(root).all_instances(alive_only=True) if i.fleet == "quota-demo"]
    assert sum(i.gpus for i in alive if i.pool.market is Market.SPOT) <= 16
    assert sum(i.gpus for i in alive) >= 32
