"""The RunPod adapter against the fake RunPod REST API v2: the client's refusals and retries,
untrusted answers, offers (on-demand only; spot rows not for sale), launch, lost pods, and where
credentials may and may not appear."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from runpod_server import API_KEY, RunPodServer  # noqa: E402

from fleet.catalog import Catalog, snapshot_offers  # noqa: E402
from fleet.errors import (  # noqa: E402
    AuthError,
    MalformedResponseError,
    NoCapacityError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
)
from fleet.model import InstanceState, LaunchRequest, Market, NodeConfig, fleet_tags  # noqa: E402
from fleet.planning.candidates import NO_CAPACITY, select  # noqa: E402
from fleet.spec import FleetSpec  # noqa: E402
from providers.base import NodesWithoutIdentity, OfferQuery  # noqa: E402
from providers.runpod.api import client, find_api_key  # noqa: E402
from providers.runpod.errors import RULES  # noqa: E402
from providers.runpod.offers import GPU_TYPES, country, parse_instance_type  # noqa: E402
from providers.runpod.provider import RunPodProvider  # noqa: E402
from providers.runpod.schemas import GpuList, PodList  # noqa: E402
from providers.runpod.settings import RunPodSettings  # noqa: E402

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def server():
    srv = RunPodServer(port=0).start()
    yield srv
    srv.stop()


def control(server: RunPodServer, path: str, body: dict | None = None) -> dict:
    url = f"{server.url}/_control/{path}"
    resp = httpx.post(url, json=body) if body is not None else httpx.get(url)
    resp.raise_for_status()
    return resp.json()


@pytest.fixture
def fake(server: RunPodServer) -> RunPodServer:
    control(server, "reset", {})
    return server


def api(fake: RunPodServer, key: str = API_KEY):
    return client(fake.url, key, rules=RULES.with_delays((0.01, 0.02, 0.05)), sleep=lambda s: None)


def make(fake: RunPodServer, **kw) -> RunPodProvider:
    return RunPodProvider(kw.pop("settings", RunPodSettings()), api=api(fake, kw.pop("key", API_KEY)), **kw)


def offer(provider: RunPodProvider, itype: str = "1x_H100-SXM_SECURE", zone: str = "US-KS-2"):
    return next(
        o
        for o in provider.list_offers(OfferQuery())
        if o.pool.instance_type == itype and o.pool.zone == zone and o.market is Market.ON_DEMAND
    )


def request(o, token: str = "tok-1", count: int = 1, node: NodeConfig | None = None) -> LaunchRequest:
    return LaunchRequest(
        fleet="alpha",
        offer=o,
        count=count,
        token=token,
        tags=fleet_tags("alpha", o.pool, "p1"),
        node=node or NodeConfig(),
    )


# ---- the client ----------------------------------------------------------------------------


def test_the_key_comes_from_the_environment_or_the_official_config(tmp_path: Path):
    assert find_api_key({"RUNPOD_API_KEY": "k1"}, tmp_path) == "k1"
    assert find_api_key({}, tmp_path) == ""
    (tmp_path / ".runpod").mkdir()
    (tmp_path / ".runpod" / "config.toml").write_text('[default]\napi_key = "k2"\n')
    assert find_api_key({}, tmp_path) == "k2"
    (tmp_path / ".runpod" / "config.toml").write_text("not = [toml")
    assert find_api_key({}, tmp_path) == ""


def test_refusals_are_our_error_classes(fake):
    with pytest.raises(AuthError):
        api(fake, "wrong").request("GET", "/v2/pods", what="list pods", idempotent=True)
    client = api(fake)
    pod = {"name": "x", "image": "i", "gpu": {"id": H100}}
    for kind, cls in (("balance", QuotaExceededError), ("capacity", NoCapacityError), ("forbidden", AuthError)):
        control(fake, "faults", {"target": "create", "kind": kind})
        with pytest.raises(cls):
            client.request("POST", "/v2/pods", body=pod, what="create")
    with pytest.raises(ProviderError) as err:  # the contract refused: named, never retried
        client.request("POST", "/v2/pods", body={"name": "x", "gpu": {"id": H100}}, what="create")
    assert err.value.code == "invalid-request" and "image" in str(err.value)


def test_a_pool_the_account_may_not_rent_is_a_capacity_shortfall(fake):
    provider = make(fake)
    control(fake, "faults", {"target": "create", "kind": "forbidden"})
    got = provider.launch(request(offer(provider), token="t-403"))
    assert got.instances == () and got.error_kind == "capacity" and got.error_code == "pool-forbidden"


def test_throttling_is_retried_after_retry_after_and_5xx_only_for_reads(fake):
    client = api(fake)
    control(fake, "faults", {"target": "list", "kind": "throttle", "count": 2})
    assert client.request("GET", "/v2/pods", what="list pods", idempotent=True, schema=PodList).pods == []
    control(fake, "faults", {"target": "list", "kind": "throttle", "count": 50})
    with pytest.raises(RateLimitedError):
        client.request("GET", "/v2/pods", what="list pods", idempotent=True)
    control(fake, "faults/clear", {})
    control(fake, "faults", {"target": "create", "kind": "server-error"})
    calls = client.calls
    with pytest.raises(ProviderError):  # a create that failed so may have made a pod: raised, not retried
        client.request("POST", "/v2/pods", body={"name": "x", "image": "i", "gpu": {"id": H100}}, what="create")
    assert client.calls == calls + 1


@pytest.mark.parametrize("variant", ["truncated", "html", "empty", "wrong-types"])
@pytest.mark.parametrize(
    "target, path, schema", [("list", "/v2/pods", PodList), ("catalog", "/v2/catalog/gpus", GpuList)]
)
def test_a_malformed_200_is_an_error_never_an_empty_answer(fake, variant, target, path, schema):
    control(fake, "faults", {"target": target, "kind": "malformed", "variant": variant, "count": 50})
    with pytest.raises(MalformedResponseError):
        api(fake).request("GET", path, what=target, idempotent=True, schema=schema)


def test_hostile_provider_text_is_scrubbed_and_the_key_never_shows(fake):
    control(fake, "faults", {"target": "*", "kind": "hostile"})
    with pytest.raises(ProviderError) as err:
        api(fake).request("GET", "/v2/pods", what="list pods", idempotent=True)
    text = str(err.value)
    assert API_KEY not in text and "\x1b" not in text and "\r" not in text and "\n" not in text
    assert API_KEY not in repr(api(fake))


# ---- offers --------------------------------------------------------------------------------


def test_every_snapshot_runpod_type_parses_and_maps_to_its_accelerator():
    rows = [o for o in snapshot_offers() if o.pool.provider == "runpod"]
    assert rows
    for o in rows:
        shape = parse_instance_type(o.pool.instance_type)
        assert shape is not None, o.pool.instance_type
        assert GPU_TYPES[shape.gpu_id][1] == o.accelerator and shape.count == o.gpus
    assert (country("US-KS-2"), country("EU-RO-1"), country("EUR-IS-1"), country("CA-MTL-1")) == (
        "US",
        "RO",
        "IS",
        "CA",
    )


def test_offers_are_on_demand_per_data_center(fake):
    control(fake, "stock", {"gpu": H100, "dataCenter": "EU-RO-1", "free": 0})
    offers = make(fake).list_offers(OfferQuery(accelerators=("H100",)))
    live = [o for o in offers if o.market is Market.ON_DEMAND]
    assert {o.pool.instance_type for o in live} >= {"1x_H100-SXM_SECURE", "8x_H100-SXM_COMMUNITY", "4x_H100_SECURE"}
    ks = next(o for o in live if o.pool.id == "runpod/US/US-KS-2/2x_H100-SXM_SECURE/on-demand")
    assert ks.price_per_hour == pytest.approx(2 * 2.99) and ks.source == "live"
    assert not any(o.pool.zone == "EU-RO-1" and o.pool.instance_type.endswith("H100-SXM_SECURE") for o in live)
    assert "8x_H100_COMMUNITY" not in {o.pool.instance_type for o in live}  # over the community maxCount
    assert not [o for o in offers if o.market is Market.SPOT]  # RunPod's API sells none


def test_snapshot_spot_rows_are_not_for_sale_and_the_planner_never_picks_them(fake):
    spec = FleetSpec.model_validate(
        {"name": "floor", "capacity": {"gpus": 8, "accelerators": ["H100"]}, "providers": {"runpod": {}}}
    )
    catalog = Catalog({"runpod": make(fake)})
    live, _ = catalog.offers(OfferQuery(accelerators=("H100",)))
    assert live and all(o.market is Market.ON_DEMAND for o in live)
    control(fake, "faults", {"target": "catalog", "kind": "server-error", "count": 100})
    fallback, info = Catalog({"runpod": make(fake)}).offers(OfferQuery(accelerators=("H100",)))
    spot = [o for o in fallback if o.market is Market.SPOT]
    assert info.fallbacks == ("runpod",) and spot and all(o.capacity_hint == 0 for o in spot)
    chosen = select(spec, fallback)
    assert chosen.rule_counts[NO_CAPACITY] >= len({o.pool.id for o in spot})
    assert chosen.offers and all(o.market is Market.ON_DEMAND for o in chosen.offers)


# ---- launch, list, terminate ---------------------------------------------------------------


def test_launch_is_idempotent_and_pinned_to_the_pools_data_center(fake):
    provider = make(fake)
    o = offer(provider)
    first = provider.launch(request(o, count=2))
    assert len(first.instances) == 2 and not first.error_kind
    again = make(fake).launch(request(o, count=2))  # a new process: found by label, nothing created
    assert {i.id for i in again.instances} == {i.id for i in first.instances}
    made = [p for p in control(fake, "pods")["pods"] if not p["terminated"]]
    assert len(made) == 2 and {p["dataCenterId"] for p in made} == {"US-KS-2"}
    body = made[0]["create_body"]
    assert (
        body["gpu"] == {"id": H100, "count": 1} and body["cloud"] == "SECURE" and body["dataCenterIds"] == ["US-KS-2"]
    )
    script = base64.b64decode(body["env"]["SPOTFLEET_BOOT"]).decode()
    assert "fleet" in script and "run" in script and "SPOTFLEET_BOOT" in body["args"]


def test_no_capacity_and_balance_are_shortfalls_not_crashes(fake):
    provider = make(fake)
    o = offer(provider)
    control(fake, "stock", {"gpu": H100, "dataCenter": "US-KS-2", "free": 1})
    got = provider.launch(request(o, count=3, token="t-cap"))
    assert len(got.instances) == 1 and got.error_kind == "capacity"
    control(fake, "faults", {"target": "create", "kind": "balance"})
    with pytest.raises(QuotaExceededError):
        provider.launch(request(offer(provider, "1x_RTX4090_SECURE"), token="t-bal"))


def test_a_lost_pod_is_listed_stopped_from_its_status_and_terminate_spares_foreign_pods(fake):
    provider = make(fake)
    made = provider.launch(request(offer(provider), count=2, token="t-lost")).instances
    control(fake, "lose", {"ids": [made[0].id], "status": "EXITED"})
    foreign = control(fake, "foreign", {"count": 1, "name": "spotfleet-alpha"})["ids"]
    listed = {i.id: i for i in provider.list_instances("alpha")}
    assert set(listed) == {i.id for i in made}
    assert listed[made[0].id].state is InstanceState.STOPPED and listed[made[0].id].reason == "lost"
    assert listed[made[1].id].state is InstanceState.RUNNING
    provider.terminate([*listed, *foreign, "rp-gone"])
    alive = [p["id"] for p in control(fake, "pods")["pods"] if not p["terminated"]]
    assert alive == foreign
    assert provider.list_instances("alpha") == []


def test_only_the_granted_scoped_credentials_reach_the_pod_env(fake):
    provider = make(fake, environ={"AWS_REGION": "us-east-1", "AWS_SECRET_ACCESS_KEY": "operator-secret"})
    assert isinstance(provider, NodesWithoutIdentity)
    o = offer(provider)
    node = NodeConfig(checkpoint_uri="s3://bucket/alpha")
    with pytest.raises(ProviderError) as err:
        provider.launch(request(o, token="t-nocred", node=node))
    assert err.value.code == "no-node-credentials"
    provider.use_node_credentials({"AWS_ACCESS_KEY_ID": "scoped-id", "AWS_SECRET_ACCESS_KEY": "scoped-secret"})
    provider.launch(request(o, token="t-cred", node=node))
    env = control(fake, "pods")["pods"][-1]["create_body"]["env"]
    assert env["AWS_SECRET_ACCESS_KEY"] == "scoped-secret" and env["AWS_REGION"] == "us-east-1"
    assert "operator-secret" not in str(control(fake, "pods"))
    assert "scoped-secret" not in base64.b64decode(env["SPOTFLEET_BOOT"]).decode()


def test_a_spot_pool_is_refused_by_name(fake):
    provider = make(fake)
    spot = next(o for o in snapshot_offers() if o.pool.provider == "runpod" and o.market is Market.SPOT)
    with pytest.raises(ProviderError) as err:
        provider.launch(request(spot, token="t-spot"))
    assert err.value.code == "no-interruptible"


# ---- what RunPod bills (ReadsBilledRate) -------------------------------------------------


def test_the_billed_rate_is_the_pods_cost_and_follows_a_reprice(fake):
    from providers.base import ReadsBilledRate

    provider = make(fake)
    assert isinstance(provider, ReadsBilledRate)
    o = offer(provider)
    a, b = provider.launch(request(o, count=2)).instances
    assert a.price_per_hour == pytest.approx(o.price_per_hour)  # the planned rate
    rates = provider.billed_rates([a, b])
    pods = {p["id"]: p for p in control(fake, "pods")["pods"]}
    assert {k: (r.per_hour, r.source, r.rental) for k, r in rates.items()} == {
        a.id: (pytest.approx(pods[a.id]["cost"]), "instance", "on-demand"),
        b.id: (pytest.approx(pods[b.id]["cost"]), "instance", "on-demand"),
    }
    control(fake, "reprice", {"ids": [b.id], "rate": 4.25})
    control(fake, "lose", {"ids": [a.id]})
    assert {k: r.per_hour for k, r in provider.billed_rates([a, b]).items()} == {b.id: 4.25}  # lost: left out


@pytest.mark.parametrize("variant", ["truncated", "html", "empty", "wrong-types"])
def test_an_unreadable_pod_list_is_an_error_never_a_rate(fake, variant):
    provider = make(fake)
    made = provider.launch(request(offer(provider))).instances[0]
    control(fake, "faults", {"target": "list", "kind": "malformed", "variant": variant, "count": 50})
    with pytest.raises(MalformedResponseError):
        provider.billed_rates([made])


def test_a_running_pod_without_a_cost_is_malformed():
    from providers.runpod.instances import billed_rate
    from providers.runpod.schemas import Pod

    with pytest.raises(MalformedResponseError):
        billed_rate(Pod(id="rp1", name="spotfleet-alpha", status="RUNNING", cost=None), 0.0)
