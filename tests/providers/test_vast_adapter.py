"""The Vast adapter's own behaviour against the fake Vast server: offers, bids, outbid remedies,
failed bids, throttling, paging, and where credentials may and may not appear."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from vast_server import API_KEY, VastServer  # noqa: E402

from fleet.catalog import Catalog  # noqa: E402
from fleet.errors import AuthError, ProviderError, RateLimitedError  # noqa: E402
from fleet.model import InstanceState, LaunchRequest, Market, NodeConfig, fleet_tags  # noqa: E402
from fleet.spec import KNOWN_ACCELERATORS, VastBid  # noqa: E402
from providers.base import NodesWithoutIdentity, OfferQuery  # noqa: E402
from providers.vast.api import VastApi  # noqa: E402
from providers.vast.bids import interruptions_per_hour  # noqa: E402
from providers.vast.offers import GPU_NAMES, accelerator, storage_per_hour  # noqa: E402
from providers.vast.provider import VastProvider  # noqa: E402
from providers.vast.settings import VastSettings  # noqa: E402

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
        "capacity": 4,
    },
    {
        "id": 12,
        "machine_id": 2,
        "num_gpus": 2,
        "gpu_name": "A100 SXM4",
        "gpu_ram": 81920,
        "dph_base": 2.4,
        "min_bid": 1.0,
        "reliability2": 0.98,
        "geolocation": "Bavaria, DE",
    },
    {
        "id": 13,
        "machine_id": 3,
        "num_gpus": 1,
        "gpu_name": "RTX 4090",
        "gpu_ram": 24564,
        "dph_base": 0.4,
        "min_bid": 0.2,
        "reliability2": 0.80,
        "geolocation": "Guangdong, CN",
    },
    {
        "id": 14,
        "machine_id": 4,
        "num_gpus": 1,
        "gpu_name": "H100 SXM",
        "gpu_ram": 81559,
        "dph_base": 2.0,
        "min_bid": 1.7,
        "reliability2": 0.99,
        "geolocation": "Quebec, CA",
    },
    {
        "id": 15,
        "machine_id": 5,
        "num_gpus": 1,
        "gpu_name": "Some New GPU",
        "gpu_ram": 1000,
        "dph_base": 0.1,
        "min_bid": 0.05,
        "reliability2": 0.99,
        "geolocation": "Texas, US",
    },
]


@pytest.fixture(scope="module")
def server():
    srv = VastServer(port=0).start()
    yield srv
    srv.stop()


def control(server: VastServer, path: str, body: dict | None = None) -> dict:
    url = f"{server.url}/_control/{path}"
    resp = httpx.post(url, json=body) if body is not None else httpx.get(url)
    resp.raise_for_status()
    return resp.json()


@pytest.fixture
def fake(server: VastServer) -> VastServer:
    control(server, "reset", {"asks": ASKS})
    return server


def make(fake: VastServer, key: str | None = API_KEY, **kw) -> VastProvider:
    settings = kw.pop("settings", VastSettings(min_reliability=0.9))
    api = VastApi(fake.url, key or "", retry_delays=(0.01, 0.02, 0.05))
    return VastProvider(settings, api=api, **kw)


def request(offer, token: str = "tok-1", count: int = 1, node: NodeConfig | None = None) -> LaunchRequest:
    return LaunchRequest(
        fleet="alpha",
        offer=offer,
        count=count,
        token=token,
        tags=fleet_tags("alpha", offer.pool, "p1"),
        node=node or NodeConfig(),
    )


def pick(provider: VastProvider, machine: int, market: Market = Market.SPOT):
    return next(
        o
        for o in provider.list_offers(OfferQuery())
        if o.pool.instance_type.endswith(f"-m{machine}") and o.market is market
    )


# ---- offers ------------------------------------------------------------------------------


def test_every_vast_gpu_name_maps_to_a_catalog_accelerator():
    for name in GPU_NAMES:
        for ram in (16_000, 81_920):
            assert accelerator(name, ram) in KNOWN_ACCELERATORS, name
    assert accelerator("A100 SXM4", 81_920) == "A100-80GB" and accelerator("A100 SXM4", 40_960) == "A100-40GB"
    assert accelerator("H100 NVL") == "H100-NVL" and accelerator("Some New GPU") is None


def test_offers_are_machines_priced_as_bid_plus_storage(fake):
    offers = make(fake).list_offers(OfferQuery())
    machines = {o.pool.instance_type for o in offers}
    # reliability 0.8 and an unknown GPU are left out
    assert machines == {"1x-H100_SXM-m1", "2x-A100_SXM4-m2", "1x-H100_SXM-m4"}
    spot = pick(make(fake), 1)
    storage = storage_per_hour(0.15, 50)
    assert spot.price_per_hour == pytest.approx(1.0 * 1.15 + storage, abs=1e-4)
    assert spot.on_demand_price == pytest.approx(2.0 + storage, abs=1e-4)
    assert spot.capacity_hint == 1 and spot.pool.region == "us-texas" and spot.pool.zone == ""
    od = pick(make(fake), 2, Market.ON_DEMAND)
    assert od.accelerator == "A100-80GB" and od.gpus == 2 and od.interruptions_per_hour == 0
    assert od.price_per_hour == pytest.approx(2.4 + storage, abs=1e-4)


def test_search_sends_the_filters_and_countries_are_applied(fake):
    settings = VastSettings(min_reliability=0.5, exclude_countries=["DE"], min_cuda=12.2, disk_gb=80)
    offers = make(fake, settings=settings).list_offers(OfferQuery(accelerators=("RTX4090", "A100-80GB")))
    assert {o.pool.instance_type for o in offers} == {"1x-RTX_4090-m3"}
    only_us = make(fake, settings=VastSettings(min_reliability=0.5, countries=["us"])).list_offers(OfferQuery())
    assert {o.pool.region for o in only_us} == {"us-texas"}
    control(fake, "asks/11", {"cuda_max_good": 11.8})
    again = make(fake, settings=settings).list_offers(OfferQuery())
    assert not any(o.pool.instance_type.endswith("-m1") for o in again)


def test_bids_respect_the_on_demand_fraction_and_the_gpu_hour_cap(fake):
    # machine 4: min_bid 1.7 of on-demand 2.0; 0.9 x 2.0 = 1.8 caps the bid below 1.7 x 1.15
    capped = pick(make(fake), 4)
    storage = storage_per_hour(0.15, 50)
    assert capped.price_per_hour == pytest.approx(1.8 + storage, abs=1e-4)
    assert capped.interruptions_per_hour > pick(make(fake), 1).interruptions_per_hour  # a thinner margin
    tight = make(fake, settings=VastSettings(min_reliability=0.9, bid=VastBid(max_fraction_of_on_demand=0.8)))
    assert not any(
        o.pool.instance_type.endswith("-m4") and o.market is Market.SPOT for o in tight.list_offers(OfferQuery())
    )  # 0.8 x 2.0 < min_bid
    gpu_cap = make(fake, max_per_gpu_hour=1.1).list_offers(OfferQuery(on_demand=False))
    assert {o.pool.instance_type for o in gpu_cap} == {"1x-H100_SXM-m1", "2x-A100_SXM4-m2"}
    assert all(o.price_per_hour <= 1.1 * o.gpus + 1e-9 for o in gpu_cap)


def test_interruption_estimate_falls_with_reliability_and_bid_margin():
    assert interruptions_per_hour(0.99, 1.3, 1.0) < interruptions_per_hour(0.99, 1.05, 1.0)
    assert interruptions_per_hour(0.999, 1.2, 1.0) < interruptions_per_hour(0.9, 1.2, 1.0)


def test_offers_are_cached_briefly(fake):
    provider = make(fake, cache_seconds=60)
    first = provider.list_offers(OfferQuery())
    before = control(fake, "calls")["calls"].get("POST /api/v0/bundles/", 0)
    assert provider.list_offers(OfferQuery()) == first
    assert control(fake, "calls")["calls"].get("POST /api/v0/bundles/", 0) == before


def test_a_failed_search_falls_back_to_the_snapshot_whose_pools_cannot_launch(fake):
    control(fake, "faults", {"target": "search", "kind": "server-error", "count": 100})
    provider = make(fake)
    offers, info = Catalog(providers={"vast": provider}).offers(OfferQuery(accelerators=("H100",)))
    assert info.fallbacks == ("vast",) and offers and all(o.source == "snapshot" for o in offers)
    with pytest.raises(ProviderError) as err:
        provider.launch(request(offers[0]))
    assert err.value.code == "snapshot-pool"


def test_throttling_honours_retry_after_and_search_quota_is_not_retried(fake):
    control(fake, "faults", {"target": "search", "kind": "throttle", "count": 2, "retry_after": 0})
    provider = make(fake)
    assert provider.list_offers(OfferQuery(on_demand=False))
    assert control(fake, "calls")["calls"]["POST /api/v0/bundles/"] == 3
    control(fake, "faults", {"target": "search", "kind": "search-quota", "count": 5})
    with pytest.raises(RateLimitedError) as err:
        make(fake).list_offers(OfferQuery(on_demand=False))
    assert err.value.code == "search_quota_exceeded"
    assert control(fake, "calls")["calls"]["POST /api/v0/bundles/"] == 4


# ---- launch, list, remedies ------------------------------------------------------------------


def test_a_refused_bid_leaves_nothing_behind(fake):
    provider = make(fake)
    control(fake, "faults", {"target": "ask:11", "kind": "failed-bid", "count": 1})
    result = provider.launch(request(pick(provider, 1)))
    assert result.instances == () and result.error_kind == "capacity" and result.error_code == "invalid_price"
    [left] = control(fake, "instances")["instances"]
    assert left["destroyed"] and left["cur_state"] == "stopped"
    assert provider.list_instances("alpha") == []


def test_a_bid_overtaken_before_create_is_a_capacity_shortfall(fake):
    provider = make(fake)
    offer = pick(provider, 1)
    control(fake, "asks/11", {"min_bid": 1.5})  # the price to beat rose after the search
    result = provider.launch(request(offer))
    assert result.instances == () and result.error_kind == "capacity" and result.error_code == "invalid_price"
    assert control(fake, "instances")["instances"] == []  # cancel_unavail: nothing was left behind


def test_outbid_is_listed_stopped_and_can_be_rebid_or_destroyed(fake):
    provider = make(fake)
    ids = [i.id for i in provider.launch(request(pick(provider, 1), count=2)).instances]
    control(fake, "outbid", {"ids": [int(ids[0])], "min_bid": 1.2})
    listed = {i.id: i for i in provider.list_instances("alpha")}
    stopped = listed[ids[0]]
    assert stopped.state is InstanceState.STOPPED and stopped.reason == "outbid" and stopped.ended_at is not None
    assert stopped.price_per_hour == pytest.approx(storage_per_hour(0.15, 50), abs=1e-6)  # storage only
    assert listed[ids[1]].state.alive and [i.id for i in provider.outbid("alpha")] == [ids[0]]
    bid = provider.raise_bid(ids[0])
    assert bid == pytest.approx(1.2 * 1.15, abs=1e-4)
    assert {i.id: i.state for i in provider.list_instances("alpha")}[ids[0]] is InstanceState.RUNNING
    control(fake, "outbid", {"ids": [int(ids[0])], "min_bid": 1.95})  # over 0.9 x on-demand
    with pytest.raises(ProviderError) as err:
        provider.raise_bid(ids[0])
    assert err.value.code == "bid-over-cap"
    provider.destroy(ids[0])
    provider.destroy(ids[0])  # gone is success
    assert [i.id for i in provider.list_instances("alpha")] == [ids[1]]


def test_listing_follows_next_token_across_pages(fake):
    control(fake, "asks/11", {"capacity": 60})
    provider = make(fake)
    made = provider.launch(request(pick(provider, 1), count=60)).instances
    assert len(made) == 60
    control(fake, "foreign", {"ask": 12, "count": 3})
    before = control(fake, "calls")["calls"].get("GET /api/v1/instances/", 0)
    assert sorted(i.id for i in provider.list_instances("alpha")) == sorted(i.id for i in made)
    assert control(fake, "calls")["calls"]["GET /api/v1/instances/"] - before == 3  # 63 rows, 25 a page


def test_only_the_granted_scoped_credentials_reach_the_instance_env(fake):
    own = "operator-own-long-lived-secret"
    secret = "s3cr3t-value-for-test"
    provider = make(
        fake,
        environ={
            "AWS_ACCESS_KEY_ID": "AKIAOPERATOR",
            "AWS_SECRET_ACCESS_KEY": own,
            "PATH": "/x",
            "AWS_REGION": "eu-west-1",
        },
    )
    assert isinstance(provider, NodesWithoutIdentity)
    node = NodeConfig(checkpoint_uri="s3://ckpt/alpha", env={"WANDB_MODE": "offline"})
    with pytest.raises(ProviderError, match="no scoped credentials") as err:  # never the operator's keys
        provider.launch(request(pick(provider, 1), node=node))
    assert err.value.code == "no-node-credentials" and control(fake, "instances")["instances"] == []
    provider.use_node_credentials({"AWS_ACCESS_KEY_ID": "AKIASCOPED", "AWS_SECRET_ACCESS_KEY": secret})
    result = provider.launch(request(pick(provider, 1), node=node))
    [row] = control(fake, "instances")["instances"]
    body = row["create_body"]
    assert body["env"]["AWS_SECRET_ACCESS_KEY"] == secret and body["env"]["WANDB_MODE"] == "offline"
    assert body["env"]["AWS_REGION"] == "eu-west-1" and own not in json.dumps(body)
    assert "PATH" not in body["env"] and body["price"] == pytest.approx(1.15)
    assert secret not in body["onstart"] and secret not in body["label"]
    assert "SPOTFLEET_CHECKPOINT_URI=s3://ckpt/alpha" in body["onstart"]
    listed = provider.list_instances("alpha")
    for text in (result.model_dump_json(), json.dumps([i.model_dump(mode="json") for i in listed]), repr(provider)):
        assert secret not in text and API_KEY not in text


def test_without_a_key_search_works_and_launching_names_the_fix(fake):
    provider = make(fake, key=None)
    offer = pick(provider, 1)
    with pytest.raises(AuthError) as err:
        provider.launch(request(offer))
    assert "VAST_API_KEY" in str(err.value)


# ---- what Vast bills (ReadsBilledRate) ---------------------------------------------------


def test_the_billed_rate_is_the_rows_dph_total_and_its_rental_kind(fake):
    from providers.base import ReadsBilledRate

    provider = make(fake)
    assert isinstance(provider, ReadsBilledRate)
    offer = pick(provider, 1)
    bid = provider.launch(request(offer, count=1)).instances[0]
    control(fake, "asks/11", {"drops_bid": True})  # the bid does not reach the host
    od = provider.launch(request(offer, token="tok-2", count=1)).instances[0]
    control(fake, "asks/11", {"drops_bid": False, "bill_markup": 0.5})  # the host repriced under us
    dear = provider.launch(request(offer, token="tok-3", count=1)).instances[0]
    control(fake, "foreign", {"ask": 12, "count": 1})
    rates = provider.billed_rates([bid, od, dear])
    rows = {str(r["id"]): r for r in control(fake, "instances")["instances"]}
    assert {iid: (r.per_hour, r.source, r.rental) for iid, r in rates.items()} == {
        bid.id: (pytest.approx(rows[bid.id]["dph_total"]), "instance", "bid"),
        od.id: (pytest.approx(rows[od.id]["dph_total"]), "instance", "on-demand"),
        dear.id: (pytest.approx(rows[dear.id]["dph_total"]), "instance", "bid"),
    }
    assert rates[bid.id].per_hour == pytest.approx(bid.price_per_hour, abs=1e-6)  # as planned
    assert rates[od.id].per_hour > od.price_per_hour  # on-demand, not the bid
    assert rates[dear.id].per_hour == pytest.approx(dear.price_per_hour + 0.5, abs=1e-6)
    provider.destroy(bid.id)
    assert bid.id not in provider.billed_rates([bid, od])  # gone: left out
    assert provider.billed_rates([]) == {}


@pytest.mark.parametrize("variant", ["truncated", "html", "empty", "wrong-types"])
def test_an_unreadable_listing_is_an_error_never_a_rate(fake, variant):
    from fleet.errors import MalformedResponseError

    provider = make(fake)
    made = provider.launch(request(pick(provider, 1))).instances[0]
    control(fake, "faults", {"target": "list", "kind": "malformed", "variant": variant, "count": 5})
    with pytest.raises(MalformedResponseError):
        provider.billed_rates([made])


def test_a_row_without_a_price_is_malformed_not_free():
    from fleet.errors import MalformedResponseError
    from providers.vast.instances import billed_rate

    for row in (
        {"id": 1, "is_bid": True},
        {"id": 1, "dph_total": "1.2", "is_bid": True},
        {"id": 1, "dph_total": float("nan"), "is_bid": False},
        {"id": 1, "dph_total": 1.0},
    ):
        with pytest.raises(MalformedResponseError):
            billed_rate(row, 0.0)
