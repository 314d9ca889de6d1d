"""The Lambda adapter against the fake Lambda server: live capacity into offers, idempotent
launches found again by their tags, refusals as launch results, the SSH key Lambda requires,
the bootstrap as user data, and what terminate and teardown may and may not touch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fakes"))
from lambda_server import API_KEY, LambdaServer  # noqa: E402
from support.fake_control import control  # noqa: E402

from fleet.catalog import snapshot_offers  # noqa: E402
from fleet.errors import MalformedResponseError, ProviderError, QuotaExceededError  # noqa: E402
from fleet.model import InstanceState, LaunchRequest, Market, NodeConfig, PoolKey, fleet_tags  # noqa: E402
from providers.base import OfferQuery  # noqa: E402
from providers.lambda_cloud.api import LambdaApi  # noqa: E402
from providers.lambda_cloud.errors import TABLE  # noqa: E402
from providers.lambda_cloud.offers import accelerator  # noqa: E402
from providers.lambda_cloud.provider import LambdaProvider  # noqa: E402
from providers.lambda_cloud.settings import LambdaSettings  # noqa: E402

PUBLIC = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T user@laptop"


def make(fake: LambdaServer, tmp_path: Path, **kw) -> LambdaProvider:
    api = LambdaApi(fake.url, API_KEY, retry_delays=(0.01, 0.02), launch_interval=0.01)
    return LambdaProvider(
        kw.pop("settings", LambdaSettings()), api=api, cache_seconds=0, home=tmp_path, environ={}, **kw
    )


def offer_in(provider: LambdaProvider, region: str, instance_type: str):
    return next(
        o
        for o in provider.list_offers(OfferQuery())
        if o.pool.region == region and o.pool.instance_type == instance_type
    )


def request(offer, token: str = "tok-1", count: int = 1, node: NodeConfig | None = None) -> LaunchRequest:
    return LaunchRequest(
        fleet="alpha",
        offer=offer,
        count=count,
        token=token,
        tags=fleet_tags("alpha", offer.pool, "p1"),
        node=node or NodeConfig(ssh_key=PUBLIC),
    )


def launched(fake: LambdaServer) -> list[dict]:
    return control(fake, "instances")["instances"]


# ---- offers ------------------------------------------------------------------------------


def test_offers_are_the_regions_with_capacity_now(fake, tmp_path):
    provider = make(fake, tmp_path)
    offers = provider.list_offers(OfferQuery(accelerators=("A10",)))
    assert sorted(o.pool.region for o in offers) == ["us-east-1", "us-west-1"]
    assert all(o.pool.market is Market.ON_DEMAND and o.price_per_hour == 0.75 and o.source == "live" for o in offers)
    control(fake, "capacity", {"type": "gpu_1x_a10", "region": "us-west-1", "count": 0})
    assert [o.pool.region for o in provider.list_offers(OfferQuery(accelerators=("A10",)))] == ["us-east-1"]
    assert provider.list_offers(OfferQuery(on_demand=False)) == []


def test_settings_regions_limit_the_offers(fake, tmp_path):
    provider = make(fake, tmp_path, settings=LambdaSettings(regions=["us-west-1"]))
    assert {o.pool.region for o in provider.list_offers(OfferQuery())} == {"us-west-1"}


def test_a_pool_the_fleet_holds_stays_offered_with_no_capacity_left(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-south-1", "gpu_1x_h100_pcie")  # the pool holds 2
    assert len(provider.launch(request(offer, count=2)).instances) == 2
    held = [o for o in provider.list_offers(OfferQuery()) if o.pool.id == offer.pool.id]
    assert len(held) == 1 and held[0].capacity_hint == 0


def test_every_snapshot_lambda_type_maps_to_its_catalog_accelerator():
    """The snapshot and the adapter name Lambda's GPUs alike (the descriptions are Lambda's)."""
    descriptions = {
        "gpu_1x_a10": "A10 (24 GB PCIe)",
        "gpu_1x_a100": "A100 (40 GB PCIe)",
        "gpu_1x_a100_sxm4": "A100 (40 GB SXM4)",
        "gpu_1x_a6000": "RTX A6000 (48 GB)",
        "gpu_1x_gh200": "GH200 (96 GB)",
        "gpu_1x_h100_pcie": "H100 (80 GB PCIe)",
        "gpu_1x_h100_sxm5": "H100 (80 GB SXM5)",
        "gpu_1x_rtx6000": "Quadro RTX 6000 (24 GB)",
        "gpu_8x_a100_80gb_sxm4": "A100 (80 GB SXM4)",
        "gpu_8x_v100": "Tesla V100 (16 GB)",
    }
    rows = [o for o in snapshot_offers() if o.pool.provider == "lambda"]
    assert rows and all(o.pool.market is Market.ON_DEMAND for o in rows)
    for o in rows:
        family = "_".join(o.pool.instance_type.split("_")[2:])
        for name, text in descriptions.items():
            if name.split("_", 2)[2] == family:
                assert accelerator(text) == o.accelerator, o.pool.instance_type


def test_the_local_clouds_lambda_codes_are_the_adapters():
    from providers.local.vendors import VENDORS

    codes = VENDORS["lambda"].codes
    assert TABLE.error_class(code=codes["capacity"]).__name__ == "NoCapacityError"
    assert TABLE.error_class(code=codes["quota"]).__name__ == "QuotaExceededError"
    assert TABLE.error_class(code=codes["auth"]).__name__ == "AuthError"
    assert TABLE.error_class(code=codes["throttle"]).__name__ == "RateLimitedError"
    assert TABLE.error_class(code=codes["server-error"]).__name__ == "TransientProviderError"


# ---- launch ------------------------------------------------------------------------------


def test_launch_tags_names_and_boots_the_nodes(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    result = provider.launch(request(offer, count=3))
    assert len(result.instances) == 3 and not result.error_kind
    rows = launched(fake)
    assert len(rows) == 3
    body = rows[0]["launch_body"]
    assert [r["launch_body"]["quantity"] for r in rows] == [1, 2, 2] and body["region_name"] == "us-east-1"
    assert body["name"].startswith("spotfleet-alpha-") and len(body["name"]) <= 64
    tags = {t["key"]: t["value"] for t in rows[0]["tags"]}
    assert tags["spotfleet:fleet"] == "alpha" and tags["spotfleet:pool"] == offer.pool.id
    assert tags["spotfleet:token"] == "tok-1" and tags["spotfleet:plan"] == "p1"
    assert body["user_data"].startswith("#!/bin/bash") and "run --cloud none" in body["user_data"]
    listed = provider.list_instances("alpha")
    assert {i.id for i in listed} == {i.id for i in result.instances}
    assert all(i.state is InstanceState.RUNNING and i.address for i in listed)


def test_the_ssh_key_is_registered_once_and_reused(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    provider.launch(request(offer, token="a"))
    provider.launch(request(offer, token="b"))
    keys = LambdaApi(fake.url, API_KEY).ssh_keys()
    assert len(keys) == 1 and keys[0].name.startswith("spotfleet-alpha-")
    assert {r["ssh_key_names"][0] for r in launched(fake)} == {keys[0].name}


def test_without_a_spec_key_the_fleet_gets_its_own_pair(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    provider.launch(request(offer, node=NodeConfig()))
    keys = LambdaApi(fake.url, API_KEY).ssh_keys()
    assert keys[0].public_key.endswith("spotfleet-alpha")
    assert (tmp_path / "keys" / "alpha" / "id_rsa").exists()


def test_a_bad_spec_key_is_refused_before_anything_is_made(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    with pytest.raises(ProviderError, match="node.ssh_key"):
        provider.launch(request(offer, node=NodeConfig(ssh_key="not a key")))
    assert launched(fake) == []


def test_a_rerun_with_the_same_token_launches_nothing_more(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    first = provider.launch(request(offer, count=2))
    again = provider.launch(request(offer, count=2))
    assert [i.id for i in again.instances] == [i.id for i in first.instances]
    after_crash = make(fake, tmp_path).launch(request(offer, count=2))  # a new process: found by tag
    assert {i.id for i in after_crash.instances} == {i.id for i in first.instances}
    assert len(launched(fake)) == 2
    with pytest.raises(ProviderError, match="different parameters"):
        provider.launch(request(offer, count=3))


def test_a_rerun_after_a_partial_crash_starts_only_what_is_missing(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    provider.launch(request(offer, count=1))
    result = make(fake, tmp_path).launch(request(offer, count=3))
    assert len(result.instances) == 3 and len(launched(fake)) == 3
    assert [r["launch_body"]["quantity"] for r in launched(fake)] == [1, 1, 1]


def test_an_all_or_nothing_launch_still_gets_what_the_pool_holds(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-west-1", "gpu_1x_a10")  # holds 4
    result = provider.launch(request(offer, count=7))
    assert len(result.instances) == 4 and result.error_kind == "capacity"
    assert result.error_code == "instance-operations/launch/insufficient-capacity"
    # one to start, then the rest (6: refused), half (3: started), the last 3 (refused), 1 (refused)
    assert [r["launch_body"]["quantity"] for r in launched(fake)] == [1, 3, 3, 3]
    assert control(fake, "calls")["calls"]["POST /api/v1/instance-operations/launch"] == 5


def test_a_refusal_before_anything_started_ends_the_request(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-west-1", "gpu_1x_a10")
    control(fake, "capacity", {"type": "gpu_1x_a10", "region": "us-west-1", "count": 0})
    result = provider.launch(request(offer, count=3))
    assert result.instances == () and result.error_kind == "capacity"
    assert control(fake, "calls")["calls"]["POST /api/v1/instance-operations/launch"] == 1
    control(fake, "config", {"quota": 0})
    with pytest.raises(QuotaExceededError):
        provider.launch(request(offer_in(provider, "us-east-1", "gpu_1x_a10"), token="q", count=2))
    assert launched(fake) == []


def test_a_pool_with_room_takes_two_launch_calls(fake, tmp_path):
    provider = make(fake, tmp_path)
    provider.launch(request(offer_in(provider, "us-east-1", "gpu_1x_a10"), count=5))
    assert [r["launch_body"]["quantity"] for r in launched(fake)] == [1, 4, 4, 4, 4]


def test_a_spot_pool_or_another_providers_pool_is_refused(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    spot = offer.model_copy(update={"pool": offer.pool.model_copy(update={"market": Market.SPOT})})
    with pytest.raises(ProviderError, match="on-demand"):
        provider.launch(request(spot))
    other = offer.model_copy(
        update={"pool": PoolKey(provider="vast", region="us-texas", instance_type="x", market=Market.ON_DEMAND)}
    )
    with pytest.raises(ProviderError, match="belongs to vast"):
        provider.launch(request(other))


def test_nodes_get_scoped_store_credentials_only_in_the_user_data(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    node = NodeConfig(ssh_key=PUBLIC, checkpoint_uri="s3://bucket/alpha")
    with pytest.raises(ProviderError, match="scoped credentials"):
        provider.launch(request(offer, node=node))
    provider.use_node_credentials({"AWS_ACCESS_KEY_ID": "AKIAFLEETSCOPED00001", "AWS_SECRET_ACCESS_KEY": "s" * 40})
    provider.launch(request(offer, node=node))
    row = launched(fake)[0]
    assert "AKIAFLEETSCOPED00001" in row["launch_body"]["user_data"]
    visible = {k: v for k, v in row.items() if k != "launch_body"}
    assert "AKIAFLEETSCOPED00001" not in str(visible) and "AKIAFLEETSCOPED00001" not in row["launch_body"]["name"]


# ---- list, terminate, teardown --------------------------------------------------------------


def test_a_malformed_listing_is_an_error_never_no_instances(fake, tmp_path):
    control(fake, "faults", {"target": "list", "kind": "malformed", "variant": "empty"})
    with pytest.raises(MalformedResponseError):
        make(fake, tmp_path).list_instances("alpha")


def test_terminate_is_idempotent_and_never_touches_foreign_instances(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    mine = [i.id for i in provider.launch(request(offer, count=2)).instances]
    foreign = control(fake, "foreign", {"name": "spotfleet-alpha-0000000000", "count": 1})["ids"]
    other_fleet = [
        i.id
        for i in provider.launch(
            LaunchRequest(
                fleet="beta",
                offer=offer,
                count=1,
                token="t-b",
                tags=fleet_tags("beta", offer.pool),
                node=NodeConfig(ssh_key=PUBLIC),
            )
        ).instances
    ]
    assert {i.id for i in provider.list_instances("alpha")} == set(mine)  # the name is not ownership
    provider.terminate(mine + foreign + ["0" * 32])
    provider.terminate(mine)  # gone is success
    live = {r["id"] for r in launched(fake) if r["status"] not in ("terminated", "terminating")}
    assert live == set(foreign) | set(other_fleet)
    assert provider.list_instances("alpha") == []


def test_terminate_survives_an_instance_going_meanwhile(fake, tmp_path):
    provider = make(fake, tmp_path)
    control(fake, "config", {"terminate_seconds": 3600})
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    ids = [i.id for i in provider.launch(request(offer, count=2)).instances]
    LambdaApi(fake.url, API_KEY).terminate(ids[:1])  # someone ends one first; it is "terminating"
    provider.terminate(ids)
    assert {r["status"] for r in launched(fake)} == {"terminating"}


def test_teardown_deletes_the_fleets_keys_only_when_no_instance_is_left(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    LambdaApi(fake.url, API_KEY).add_ssh_key("my-laptop", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBBB other")
    ids = [i.id for i in provider.launch(request(offer)).instances]
    assert provider.teardown("alpha") == []
    provider.terminate(ids)
    deleted = provider.teardown("alpha")
    assert len(deleted) == 1 and deleted[0].startswith("ssh-key/spotfleet-alpha-")
    assert provider.teardown("alpha") == []
    assert [k.name for k in LambdaApi(fake.url, API_KEY).ssh_keys()] == ["my-laptop"]


def test_the_spec_takes_lambdas_own_settings_and_refuses_others():
    from fleet.errors import SpecError
    from fleet.spec import parse_spec

    base = "name: tt\ncapacity: {gpus: 1, accelerators: [A10]}\nproviders:\n  lambda: %s\n"
    assert (
        parse_spec(base % "{image_family: lambda-stack-22-04}").provider_settings("lambda").image_family
        == "lambda-stack-22-04"
    )
    with pytest.raises(SpecError, match="'project' is a setting of gcp, not of lambda"):
        parse_spec(base % "{project: x}")


def test_two_fleets_with_one_spec_key_each_register_their_own(fake, tmp_path):
    """Deleting one fleet's key at its teardown must not take the key another fleet launches with."""
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    provider.launch(request(offer, token="a"))
    provider.launch(
        LaunchRequest(
            fleet="beta",
            offer=offer,
            count=1,
            token="b",
            tags=fleet_tags("beta", offer.pool),
            node=NodeConfig(ssh_key=PUBLIC),
        )
    )
    names = sorted(k.name for k in LambdaApi(fake.url, API_KEY).ssh_keys())
    assert len(names) == 2 and names[0].startswith("spotfleet-alpha-") and names[1].startswith("spotfleet-beta-")
    LambdaApi(fake.url, API_KEY).add_ssh_key("laptop", PUBLIC.replace("user@laptop", "me"))
    fresh = make(fake, tmp_path)  # a user's own key with that public key: used as it is
    fresh.launch(
        LaunchRequest(
            fleet="gamma",
            offer=offer,
            count=1,
            token="c",
            tags=fleet_tags("gamma", offer.pool),
            node=NodeConfig(ssh_key=PUBLIC),
        )
    )
    assert launched(fake)[-1]["ssh_key_names"] == ["laptop"]


# ---- billed rates ------------------------------------------------------------------------


def test_billed_rates_are_each_instance_types_listed_price_and_leave_out_the_gone(fake, tmp_path):
    provider = make(fake, tmp_path)
    offer = offer_in(provider, "us-east-1", "gpu_1x_a10")
    kept, gone = provider.launch(request(offer, token="tok-bill", count=2)).instances
    provider.terminate([gone.id])
    rates = provider.billed_rates([kept, gone])
    assert set(rates) == {kept.id}
    assert rates[kept.id].per_hour == offer.price_per_hour == 0.75  # the fake lists 75 cents/hour
    assert (rates[kept.id].source, rates[kept.id].rental) == ("list", "on-demand")
    assert provider.billed_rates([]) == {}


def test_an_unreadable_listing_is_an_error_when_reading_the_bill(fake, tmp_path):
    provider = make(fake, tmp_path)
    kept = provider.launch(request(offer_in(provider, "us-east-1", "gpu_1x_a10"), token="tok-bill-m")).instances
    control(fake, "faults", {"target": "list", "kind": "malformed", "variant": "truncated"})
    with pytest.raises(MalformedResponseError):
        provider.billed_rates(kept)
