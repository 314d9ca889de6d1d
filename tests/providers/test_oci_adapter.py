"""The OCI adapter, driven through the real ``oci`` SDK against the fake Core Services / Identity API.

The SDK signs every request with a throwaway RSA API key written for the test (the fake refuses
unsigned requests, as OCI does); its service endpoint points at the fake.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from oci_server import ADS, COMPARTMENT, IMAGE, SUBNET, TENANCY, OciServer  # noqa: E402

from fleet.errors import (  # noqa: E402
    AuthError,
    MalformedResponseError,
    NoCapacityError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
)
from fleet.model import LaunchRequest, Market, NodeConfig, fleet_tags  # noqa: E402
from providers.base import OfferQuery  # noqa: E402
from providers.kit.retry import Retrier  # noqa: E402
from providers.oci.api import OciApi, load_config  # noqa: E402
from providers.oci.check import check  # noqa: E402
from providers.oci.errors import RULES  # noqa: E402
from providers.oci.provider import OciProvider  # noqa: E402
from providers.oci.settings import OciSettings  # noqa: E402

pytest.importorskip("oci")

SETTINGS = OciSettings(compartment_id=COMPARTMENT, subnet_id=SUBNET, image_id=IMAGE)


@pytest.fixture(scope="module")
def server():
    srv = OciServer().start()
    yield srv
    srv.stop()


def control(srv: OciServer, path: str, body: dict | None = None) -> dict:
    resp = (
        httpx.post(f"{srv.url}/_control/{path}", json=body)
        if body is not None
        else httpx.get(f"{srv.url}/_control/{path}")
    )
    resp.raise_for_status()
    return resp.json()


@pytest.fixture(scope="module")
def keys(server, tmp_path_factory):
    """One API key and one SDK client pair for the module (RSA keys take a while to make)."""
    root = tmp_path_factory.mktemp("oci")
    env = server.write_config(root / "oci")
    api = OciApi(
        load_config(env["SPOTFLEET_OCI_CONFIG"]),
        endpoint=server.url,
        retrier=Retrier(RULES.with_delays((0.0, 0.0, 0.0))),
    )
    return env, api, root / "home"


@pytest.fixture
def env(server, keys):
    control(server, "reset", {})
    return keys


def make(server, env, tmp_path, settings: OciSettings = SETTINGS) -> OciProvider:
    """A fresh adapter (as a new process would make) on the module's client and key folder."""
    _, api, home = env
    return OciProvider(settings, api, cache_seconds=0.0, home=home, environ={})


def offer_of(provider: OciProvider, shape: str, market: Market, zone: str = ADS[0]):
    return next(
        o
        for o in provider.list_offers(OfferQuery())
        if o.pool.instance_type == shape and o.market is market and o.pool.zone == zone
    )


def request(offer, count: int, token: str, fleet: str = "ocf", **node) -> LaunchRequest:
    return LaunchRequest(
        fleet=fleet,
        offer=offer,
        count=count,
        token=token,
        tags=fleet_tags(fleet, offer.pool),
        node=NodeConfig(startup="python train.py", **node),
    )


def ours(server) -> list[dict]:
    return [i for i in control(server, "instances")["instances"] if i["freeformTags"].get("spotfleet_fleet")]


def test_unsigned_requests_are_refused_as_oci_does(server, env):
    resp = httpx.get(f"{server.url}/20160918/instances", params={"compartmentId": COMPARTMENT})
    assert resp.status_code == 401 and resp.json()["code"] == "NotAuthenticated"


def test_offers_are_the_gpu_shapes_of_each_ad_preemptible_only_on_vm_shapes(server, env, tmp_path):
    offers = make(server, env, tmp_path).list_offers(OfferQuery())
    assert {o.pool.zone for o in offers} == set(ADS)
    assert all(o.pool.region == "us-ashburn-1" and o.source == "live" for o in offers)
    spot = {o.pool.instance_type for o in offers if o.market is Market.SPOT}
    assert spot == {"VM.GPU.A10.1", "VM.GPU.A10.2"}
    h100 = [o for o in offers if o.pool.instance_type == "BM.GPU.H100.8"]
    assert {o.market for o in h100} == {Market.ON_DEMAND} and h100[0].price_per_hour == 80.0
    a10 = offer_of(make(server, env, tmp_path), "VM.GPU.A10.1", Market.SPOT)
    assert a10.price_per_hour == 1.0 and a10.on_demand_price == 2.0 and a10.accelerator == "A10"
    assert all(o.pool.instance_type != "VM.Standard.E4.Flex" for o in offers)


def test_a_preemptible_launch_carries_the_bootstrap_the_fleet_key_and_the_fleet_tags(server, env, tmp_path):
    provider = make(server, env, tmp_path)
    offer = offer_of(provider, "VM.GPU.A10.1", Market.SPOT, ADS[1])
    result = provider.launch(request(offer, 2, "tok-1"))
    assert len(result.instances) == 2 and not result.error_kind
    assert all(i.pool == offer.pool and i.fleet == "ocf" and i.accelerator == "A10" for i in result.instances)
    body = ours(server)[0]["launch_body"]
    assert body["availabilityDomain"] == ADS[1] and body["shape"] == "VM.GPU.A10.1"
    assert body["preemptibleInstanceConfig"] == {"preemptionAction": {"type": "TERMINATE", "preserveBootVolume": False}}
    assert body["createVnicDetails"]["subnetId"] == SUBNET and body["sourceDetails"]["imageId"] == IMAGE
    script = base64.b64decode(body["metadata"]["user_data"]).decode()
    assert "--cloud oci" in script and "python train.py" in script
    assert (
        body["metadata"]["ssh_authorized_keys"].startswith("ssh-rsa ")
        and "spotfleet-ocf" in body["metadata"]["ssh_authorized_keys"]
    )
    tags = body["freeformTags"]
    assert tags["spotfleet_fleet"] == "ocf" and tags["spotfleet_pool"] == offer.pool.id
    assert all("." not in k and ":" not in k for k in tags)
    assert {i.tags["spotfleet:fleet"] for i in provider.list_instances("ocf")} == {"ocf"}


def test_an_on_demand_launch_has_no_preemptible_config(server, env, tmp_path):
    provider = make(server, env, tmp_path)
    result = provider.launch(request(offer_of(provider, "BM.GPU.H100.8", Market.ON_DEMAND), 1, "tok-od"))
    assert len(result.instances) == 1 and result.instances[0].gpus == 8
    assert ours(server)[0]["launch_body"].get("preemptibleInstanceConfig") is None


def test_a_rerun_in_another_process_finds_by_tag_and_makes_only_the_rest(server, env, tmp_path):
    first = make(server, env, tmp_path)
    offer = offer_of(first, "VM.GPU.A10.1", Market.ON_DEMAND)
    made = first.launch(request(offer, 2, "tok-crash"))
    again = make(server, env, tmp_path).launch(request(offer, 2, "tok-crash"))  # a fresh process
    assert sorted(i.id for i in again.instances) == sorted(i.id for i in made.instances)
    # one of them ends; a larger rerun makes new slots, never a retry token whose instance ended
    first.terminate([made.instances[0].id])
    more = make(server, env, tmp_path).launch(request(offer, 3, "tok-crash"))
    assert len(more.instances) == 3 and made.instances[0].id not in {i.id for i in more.instances}
    slots = sorted(int(i["freeformTags"]["spotfleet_slot"]) for i in ours(server))
    assert slots == [0, 1, 2, 3] and len(ours(server)) == 4


def test_out_of_host_capacity_is_a_capacity_shortfall_and_a_zoneless_pool_tries_the_next_ad(server, env, tmp_path):
    provider = make(server, env, tmp_path)
    offer = offer_of(provider, "VM.GPU.A10.2", Market.ON_DEMAND, ADS[0])
    control(server, "capacity", {"ad": ADS[0], "shape": "VM.GPU.A10.2", "hosts": 1})
    short = provider.launch(request(offer, 3, "tok-full"))
    assert len(short.instances) == 1
    assert short.error_kind == "capacity" and short.error_code == "OutOfHostCapacity"
    zoneless = offer.model_copy(update={"pool": offer.pool.model_copy(update={"zone": ""}), "source": "snapshot"})
    moved = provider.launch(request(zoneless, 2, "tok-move"))
    assert len(moved.instances) == 2 and {i.pool.zone for i in moved.instances} == {ADS[1]}


def test_a_service_limit_is_a_quota_error(server, env, tmp_path):
    provider = make(server, env, tmp_path)
    offer = offer_of(provider, "BM.GPU.H100.8", Market.ON_DEMAND)
    control(server, "limits", {"shape": "BM.GPU.H100.8", "limit": 0})
    with pytest.raises(QuotaExceededError) as err:
        provider.launch(request(offer, 1, "tok-limit"))
    assert err.value.code == "LimitExceeded"
    control(server, "limits", {"shape": "BM.GPU.H100.8", "limit": 1})
    part = provider.launch(request(offer, 2, "tok-limit-2"))
    assert len(part.instances) == 1 and part.error_kind == "quota"


def test_throttling_is_retried_then_raised(server, env, tmp_path):
    provider = make(server, env, tmp_path)
    offer = offer_of(provider, "VM.GPU.A10.1", Market.ON_DEMAND)
    control(server, "faults", {"target": "list", "kind": "throttle", "count": 2})
    assert provider.list_instances("ocf") == []
    control(server, "faults", {"target": "list", "kind": "throttle", "count": 50})
    with pytest.raises(RateLimitedError):
        provider.launch(request(offer, 1, "tok-throttled"))
    control(server, "faults/clear", {})


@pytest.mark.parametrize("variant", ["truncated", "html", "empty", "wrong-types"])
def test_a_malformed_listing_is_an_error_never_no_instances(server, env, tmp_path, variant):
    provider = make(server, env, tmp_path)
    provider.launch(request(offer_of(provider, "VM.GPU.A10.1", Market.ON_DEMAND), 1, "tok-m"))
    control(server, "faults", {"target": "list", "kind": "malformed", "variant": variant, "count": 10})
    with pytest.raises(MalformedResponseError):
        provider.list_instances("ocf")
    control(server, "faults/clear", {})
    assert len(provider.list_instances("ocf")) == 1


def test_terminate_is_idempotent_and_never_touches_an_untagged_instance(server, env, tmp_path):
    provider = make(server, env, tmp_path)
    foreign = control(server, "foreign", {"count": 1})["ids"]
    made = provider.launch(request(offer_of(provider, "VM.GPU.A10.1", Market.ON_DEMAND), 2, "tok-t"))
    ids = [i.id for i in made.instances]
    provider.terminate([*ids, *foreign, "ocid1.instance.oc1.iad.gone"])
    provider.terminate(ids)
    assert provider.list_instances("ocf") == []
    rows = {i["id"]: i for i in control(server, "instances")["instances"]}
    assert rows[foreign[0]]["lifecycleState"] == "RUNNING"
    assert {rows[i]["lifecycleState"] for i in ids} == {"TERMINATED"}


def test_a_preempted_instance_leaves_the_listing(server, env, tmp_path):
    provider = make(server, env, tmp_path)
    made = provider.launch(request(offer_of(provider, "VM.GPU.A10.1", Market.SPOT), 2, "tok-p"))
    control(server, "preempt", {"ids": [made.instances[0].id]})
    assert [i.id for i in provider.list_instances("ocf")] == [made.instances[1].id]


def test_hostile_provider_text_is_escaped_and_the_signature_scrubbed(server, env, tmp_path):
    provider = make(server, env, tmp_path)
    offer = offer_of(provider, "VM.GPU.A10.1", Market.ON_DEMAND)
    control(server, "faults", {"target": "launch", "kind": "hostile", "count": 1})
    with pytest.raises(Exception) as err:
        provider.launch(request(offer, 1, "tok-h"))
    text = str(err.value)
    assert "\x1b" not in text and "\n" not in text and "\r" not in text
    assert 'signature="***' in text and TENANCY not in text and "fake line" not in text


def test_check_says_what_is_missing_and_passes_when_set(server, env, tmp_path):
    _, api, _ = env
    good = check(SETTINGS, api)
    assert good.ok and good.can_price and good.can_launch and "us-ashburn-1" in good.identity
    bare = check(OciSettings(), api)
    assert not bare.ok and "providers.oci.compartment_id" in bare.detail
    none = check(OciSettings(config_file=str(tmp_path / "nope")))
    assert not none.ok and not none.configured and "oci setup config" in none.fix


def test_an_unknown_shape_or_ad_is_refused_not_taken_for_a_full_pool(server, env, tmp_path):
    provider = make(server, env, tmp_path)
    offer = offer_of(provider, "VM.GPU.A10.1", Market.ON_DEMAND)
    for change in ({"instance_type": "VM.GPU.Z99.1"}, {"zone": "Uocm:US-ASHBURN-AD-9"}):
        alien = offer.model_copy(update={"pool": offer.pool.model_copy(update=change)})
        with pytest.raises(ProviderError) as err:
            provider.launch(request(alien, 1, f"tok-{sorted(change)[0]}"))
        assert err.value.code == "InvalidParameter" and not isinstance(err.value, NoCapacityError)
    assert ours(server) == []


def test_a_launch_without_the_ocids_names_the_missing_settings(server, env, tmp_path):
    provider = make(server, env, tmp_path, OciSettings(compartment_id=COMPARTMENT))
    with pytest.raises(ProviderError) as err:
        provider.launch(request(offer_of(provider, "VM.GPU.A10.1", Market.ON_DEMAND), 1, "tok-bare"))
    assert "providers.oci.subnet_id" in str(err.value) and "providers.oci.image_id" in str(err.value)
    assert ours(server) == []


def test_a_refused_key_is_an_auth_error(server, env, tmp_path):
    control(server, "faults", {"target": "*", "kind": "auth", "count": 1})
    with pytest.raises(AuthError):
        make(server, env, tmp_path).list_instances("ocf")


def test_billed_rates_are_the_shapes_list_price_preemptible_or_on_demand(server, env, tmp_path):
    provider = make(server, env, tmp_path)
    spot = offer_of(provider, "VM.GPU.A10.1", Market.SPOT)
    od = offer_of(provider, "BM.GPU.H100.8", Market.ON_DEMAND)
    a, b = provider.launch(request(spot, 2, "tok-bill-s")).instances
    h = provider.launch(request(od, 1, "tok-bill-od")).instances[0]
    provider.terminate([b.id])
    rates = provider.billed_rates([a, b, h])
    assert set(rates) == {a.id, h.id}
    assert (rates[a.id].per_hour, rates[a.id].rental, rates[a.id].source) == (1.0, "spot", "list")
    assert (rates[h.id].per_hour, rates[h.id].rental, rates[h.id].source) == (80.0, "on-demand", "list")
    control(server, "faults", {"target": "list", "kind": "malformed", "variant": "empty", "count": 10})
    with pytest.raises(MalformedResponseError):
        provider.billed_rates([a])
    control(server, "faults/clear", {})
