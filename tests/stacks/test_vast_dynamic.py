"""The Vast dynamic provider's create / diff / update / delete against the fake Vast server, through
the Vast adapter (the same bids, labels and start-up script as `fleet up`), and its declaration."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

pytest.importorskip("pulumi", reason="the Pulumi SDK is not installed: pip install -e '.[pulumi]'")
pytest.importorskip("httpx", reason="httpx is not installed: pip install -e '.[vast]'")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from harness import declare, one, reveal  # noqa: E402
from vast_server import API_KEY, VastServer  # noqa: E402

from fleet.bootstrap import boot_for, render  # noqa: E402
from fleet.model import LaunchRequest, NodeConfig, Offer  # noqa: E402
from fleet.planning.planner import plan as make_plan  # noqa: E402
from fleet.spec import parse_spec  # noqa: E402
from providers.base import OfferQuery  # noqa: E402
from providers.vast.api import VastApi  # noqa: E402
from providers.vast.provider import VastProvider  # noqa: E402
from stacks.layout import pools  # noqa: E402
from stacks.ownership import REBALANCER_OWNS  # noqa: E402
from stacks.vast import DYNAMIC_TYPE, VastFleet, VastPoolProvider, pool_inputs  # noqa: E402

ASKS = [
    {
        "id": 11,
        "machine_id": 1,
        "num_gpus": 1,
        "gpu_name": "H100 SXM",
        "gpu_ram": 81559,
        "dph_base": 2.0,
        "min_bid": 1.0,
        "reliability2": 0.99,
        "geolocation": "Texas, US",
        "capacity": 6,
    },
    {
        "id": 12,
        "machine_id": 2,
        "num_gpus": 1,
        "gpu_name": "H100 SXM",
        "gpu_ram": 81559,
        "dph_base": 2.1,
        "min_bid": 1.1,
        "reliability2": 0.99,
        "geolocation": "Quebec, CA",
        "capacity": 6,
    },
]
SPEC = """\
name: vastfleet
backend: cloud
capacity: {gpus: 4, accelerators: [H100]}
providers:
  vast: {min_reliability: 0.9, on_demand: false}
node: {startup: python train.py, env: {WANDB_MODE: offline}, spotfleet: preinstalled}
"""


@pytest.fixture(scope="module")
def server():
    srv = VastServer(port=0).start()
    yield srv
    srv.stop()


@pytest.fixture
def fake(server, monkeypatch):
    httpx.post(f"{server.url}/_control/reset", json={"asks": ASKS}).raise_for_status()
    monkeypatch.setenv("SPOTFLEET_VAST_URL", server.url)
    monkeypatch.setenv("VAST_API_KEY", API_KEY)
    return server


def rows(server) -> list[dict]:
    return httpx.get(f"{server.url}/_control/instances").json()["instances"]


def live(server) -> list[dict]:
    return [r for r in rows(server) if not r.get("destroyed")]


@pytest.fixture
def planned(fake):
    spec = parse_spec(SPEC)
    adapter = VastProvider(spec.provider_settings("vast"), api=VastApi(fake.url, API_KEY))
    plan = make_plan(spec, adapter.list_offers(OfferQuery(accelerators=("H100",))))
    return spec, plan, pools(spec, plan)


def test_create_rents_the_planned_count_through_the_adapter(fake, planned):
    spec, plan, planned_pools = planned
    p = planned_pools[0]
    props = pool_inputs(spec, p)
    result = VastPoolProvider().create(props)
    assert result.id == props["token"] and len(result.outs["instance_ids"]) == p.count
    made = live(fake)
    assert sorted(str(r["id"]) for r in made) == sorted(result.outs["instance_ids"])
    request = LaunchRequest(
        fleet=spec.name,
        offer=p.offer,
        count=p.count,
        token=props["token"],
        tags=dict(p.tags),
        node=NodeConfig(startup=spec.node.startup, env={"WANDB_MODE": "offline"}, spotfleet="preinstalled"),
    )
    for row in made:
        body = row["create_body"]
        assert body["onstart"] == render(boot_for("vast", request))  # the fleet up script
        assert "price" in body and body["env"]["WANDB_MODE"] == "offline"  # an interruptible bid


def test_create_again_with_the_same_token_rents_nothing_more(fake, planned):
    spec, _, planned_pools = planned
    props = pool_inputs(spec, planned_pools[0])
    first = VastPoolProvider().create(props)
    again = VastPoolProvider().create(props)  # a rerun after a crash: a new process, the same token
    assert sorted(again.outs["instance_ids"]) == sorted(first.outs["instance_ids"])
    assert len(live(fake)) == planned_pools[0].count


def test_diff_updates_counts_in_place_and_replaces_on_a_new_pool_or_node(fake, planned):
    spec, _, planned_pools = planned
    olds = pool_inputs(spec, planned_pools[0])
    provider = VastPoolProvider()
    assert not provider.diff("x", olds, dict(olds)).changes
    more = provider.diff("x", olds, {**olds, "count": olds["count"] + 1})
    assert more.changes and not more.replaces
    moved = provider.diff("x", olds, {**olds, "pool": "vast/ca-quebec/-/1x-H100_SXM-80-m2/spot"})
    assert moved.replaces == ["pool"]
    new_node = provider.diff("x", olds, {**olds, "node": {**olds["node"], "startup": "python other.py"}})
    assert new_node.replaces == ["node"]


def test_update_rents_or_destroys_the_difference_and_delete_destroys_the_pool(fake, planned):
    spec, _, planned_pools = planned
    props = pool_inputs(spec, planned_pools[0])
    provider = VastPoolProvider()
    created = provider.create(props)
    grown = provider.update(created.id, created.outs, {**props, "count": props["count"] + 2})
    assert len(grown.outs["instance_ids"]) == props["count"] + 2 == len(live(fake))
    shrunk = provider.update(created.id, grown.outs, {**props, "count": 1})
    assert len(shrunk.outs["instance_ids"]) == 1 and [str(r["id"]) for r in live(fake)] == shrunk.outs["instance_ids"]
    provider.delete(created.id, shrunk.outs)
    assert live(fake) == []


def test_delete_leaves_other_pools_and_foreign_instances_alone(fake, planned):
    spec, _, planned_pools = planned
    assert len(planned_pools) >= 2, "the plan spreads over both machines"
    provider = VastPoolProvider()
    first = provider.create(pool_inputs(spec, planned_pools[0]))
    second = provider.create(pool_inputs(spec, planned_pools[1]))
    provider.delete(first.id, first.outs)
    assert sorted(str(r["id"]) for r in live(fake)) == sorted(second.outs["instance_ids"])


def test_pools_are_declared_as_dynamic_resources_with_the_rebalancer_count_ignored(fake, planned):
    spec, _, planned_pools = planned
    declared, _ = declare(lambda: VastFleet("vastfleet-vast", spec, planned_pools))
    for p in planned_pools:
        d = one(declared, DYNAMIC_TYPE, p.name)
        assert d.inputs["count"] == p.count and d.inputs["pool"] == p.pool.id
        assert Offer.model_validate(d.inputs["offer"]) == p.offer
        assert d.ignore_changes == list(REBALANCER_OWNS[DYNAMIC_TYPE])
        assert API_KEY not in repr(d.inputs)


def test_resolved_secrets_in_node_env_reach_the_state_encrypted(fake):
    spec = parse_spec(SPEC.replace("env: {WANDB_MODE: offline}", 'env: {HF_TOKEN: "${env:HF_TOKEN}"}'))
    adapter = VastProvider(spec.provider_settings("vast"), api=VastApi(fake.url, API_KEY))
    plan = make_plan(spec, adapter.list_offers(OfferQuery(accelerators=("H100",))))
    planned_pools = pools(spec, plan, env={"HF_TOKEN": "hf-value"})
    declared, _ = declare(lambda: VastFleet("vastfleet-vast", spec, planned_pools))
    for p in planned_pools:
        node, secret = reveal(one(declared, DYNAMIC_TYPE, p.name).inputs["node"])
        assert secret and node["env"] == {"HF_TOKEN": "hf-value"}
