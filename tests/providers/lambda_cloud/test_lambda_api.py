"""The Lambda Cloud client against the fake Lambda server: auth, strict reading of every answer,
the vendor's refusals as our error classes, retries, and where the key may and may not appear."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fakes"))
from lambda_server import API_KEY, LambdaServer  # noqa: E402
from support.fake_control import control  # noqa: E402

from fleet.errors import (  # noqa: E402
    AuthError,
    InstanceNotFoundError,
    MalformedResponseError,
    NoCapacityError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    TransientProviderError,
)
from providers.lambda_cloud.api import LambdaApi, find_api_key  # noqa: E402

PUBLIC = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICN+lJwsONkwrdsSnQsu1ydUkIuIg5oOC+Eslvmtt60T test"


def api(fake: LambdaServer, key: str = API_KEY) -> LambdaApi:
    return LambdaApi(fake.url, key, retry_delays=(0.01, 0.02), launch_interval=0.05)


def launch_body(key: str = "k", **kw) -> dict:
    return {"region_name": "us-east-1", "instance_type_name": "gpu_1x_a10", "ssh_key_names": [key], "quantity": 1, **kw}


def test_instance_types_list_only_regions_with_capacity_now(fake):
    control(fake, "capacity", {"type": "gpu_1x_a10", "region": "us-west-1", "count": 0})
    types = api(fake).instance_types()
    a10 = types["gpu_1x_a10"]
    assert a10.instance_type.price_cents_per_hour == 75 and a10.instance_type.specs.gpus == 1
    assert [r.name for r in a10.regions_with_capacity_available] == ["us-east-1"]


def test_launch_list_and_terminate_round_trip(fake):
    client = api(fake)
    client.add_ssh_key("k", PUBLIC)
    ids = client.launch(
        launch_body(
            quantity=2,
            name="spotfleet-alpha-1",
            tags=[{"key": "spotfleet:fleet", "value": "alpha"}],
            user_data="#cloud-config\n",
        )
    )
    assert len(ids) == 2
    rows = {i.id: i for i in client.instances()}
    assert set(rows) == set(ids)
    assert rows[ids[0]].tag_map() == {"spotfleet:fleet": "alpha"} and rows[ids[0]].region.name == "us-east-1"
    gone = client.terminate(ids)
    assert {i.id for i in gone} == set(ids)
    assert client.instances() == []
    with pytest.raises(InstanceNotFoundError):
        client.terminate(ids)  # already gone: the whole call is refused


def test_launch_without_an_ssh_key_is_the_vendors_refusal(fake):
    client = api(fake)
    with pytest.raises(ProviderError) as err:
        client.launch({"region_name": "us-east-1", "instance_type_name": "gpu_1x_a10", "ssh_key_names": []})
    assert err.value.code == "global/invalid-parameters"
    with pytest.raises(ProviderError) as err:  # a key the account does not have
        client.launch(launch_body("nobody"))
    assert err.value.code == "global/object-does-not-exist" and not isinstance(err.value, InstanceNotFoundError)


@pytest.mark.parametrize(
    "body, code",
    [
        (launch_body(region_name="mars-1"), "global/invalid-parameters"),
        (launch_body(instance_type_name="gpu_99x_nothing"), "global/object-does-not-exist"),
        (launch_body(tags=[{"key": "Bad Key", "value": "x"}]), "global/invalid-parameters"),
        (launch_body(name="n" * 65), "global/invalid-parameters"),
    ],
)
def test_invalid_launches_are_refused_with_the_vendor_code(fake, body, code):
    client = api(fake)
    client.add_ssh_key("k", PUBLIC)
    with pytest.raises(ProviderError) as err:
        client.launch(body)
    assert err.value.code == code


def test_capacity_and_quota_refusals(fake):
    client = api(fake)
    client.add_ssh_key("k", PUBLIC)
    with pytest.raises(NoCapacityError):
        client.launch(launch_body(region_name="us-west-1", quantity=5))  # the pool holds 4
    assert client.instances() == []  # all or nothing
    control(fake, "config", {"quota": 1})
    with pytest.raises(QuotaExceededError):
        client.launch(launch_body(quantity=2))


@pytest.mark.parametrize(
    "kind, cls",
    [("auth", AuthError), ("inactive", AuthError), ("capacity", NoCapacityError), ("quota", QuotaExceededError)],
)
def test_faults_map_to_our_classes(fake, kind, cls):
    control(fake, "faults", {"target": "launch", "kind": kind})
    client = api(fake)
    client.add_ssh_key("k", PUBLIC)
    with pytest.raises(cls):
        client.launch(launch_body())


def test_a_wrong_key_is_an_auth_error_and_no_key_is_refused_before_calling(fake):
    with pytest.raises(AuthError) as err:
        api(fake, "secret_wrong_0000000000").instances()
    assert err.value.code == "global/invalid-api-key"
    client = api(fake, "")
    with pytest.raises(AuthError):
        client.instances()
    assert client.calls == 0


def test_basic_auth_is_accepted_by_the_fake_as_the_reference_allows(fake):
    resp = httpx.get(f"{fake.url}/api/v1/instances", auth=(API_KEY, ""))
    assert resp.status_code == 200 and resp.json() == {"data": []}


def test_reads_retry_throttling_and_server_errors(fake):
    control(fake, "faults", {"target": "list", "kind": "throttle", "count": 1})
    control(fake, "faults", {"target": "list", "kind": "unavailable", "count": 1})
    client = api(fake)
    assert client.instances() == []
    assert client.calls == 3


def test_throttling_that_does_not_end_is_a_rate_limited_error(fake):
    control(fake, "faults", {"target": "list", "kind": "throttle", "count": 10})
    with pytest.raises(RateLimitedError):
        api(fake).instances()


def test_a_launch_is_retried_after_429_but_never_after_a_5xx(fake):
    client = api(fake)
    client.add_ssh_key("k", PUBLIC)
    control(fake, "config", {"launch_interval": 3600})
    client.launch(launch_body())
    with pytest.raises(RateLimitedError):  # the 12-second launch limit, here an hour
        client.launch(launch_body())
    control(fake, "config", {"launch_interval": 0})
    control(fake, "faults", {"target": "launch", "kind": "throttle", "count": 1})
    assert len(client.launch(launch_body())) == 1
    control(fake, "faults", {"target": "launch", "kind": "server-error", "count": 1})
    before = client.calls
    with pytest.raises(TransientProviderError):
        client.launch(launch_body())
    assert client.calls == before + 1


@pytest.mark.parametrize(
    "target, call",
    [("list", LambdaApi.instances), ("types", LambdaApi.instance_types), ("keys", LambdaApi.ssh_keys)],
    ids=["list", "types", "keys"],
)
@pytest.mark.parametrize("variant", ["truncated", "html", "empty", "wrong-types"])
def test_a_malformed_200_is_an_error_never_an_empty_answer(fake, target, call, variant):
    control(fake, "faults", {"target": target, "kind": "malformed", "variant": variant})
    with pytest.raises(MalformedResponseError) as err:
        call(api(fake))
    assert err.value.provider == "lambda"


def test_a_malformed_launch_answer_is_an_error(fake):
    client = api(fake)
    client.add_ssh_key("k", PUBLIC)
    control(fake, "faults", {"target": "launch", "kind": "malformed", "variant": "wrong-types"})
    with pytest.raises(MalformedResponseError):
        client.launch(launch_body())


def test_a_hostile_answer_is_made_safe_and_never_shows_the_key(fake):
    control(fake, "faults", {"target": "list", "kind": "hostile"})
    with pytest.raises(ProviderError) as err:
        api(fake).instances()
    text = str(err.value)
    assert API_KEY not in text and "\x1b" not in text and "\n" not in text and "\r" not in text
    assert API_KEY not in repr(api(fake))


def test_the_key_is_found_in_the_environment_or_the_key_file(tmp_path):
    assert find_api_key({"LAMBDA_API_KEY": " secret_a "}, tmp_path) == "secret_a"
    assert find_api_key({}, tmp_path) == ""
    (tmp_path / ".lambda_cloud").mkdir()
    (tmp_path / ".lambda_cloud" / "lambda_keys").write_text("# keys\napi_key = secret_b\n")
    assert find_api_key({}, tmp_path) == "secret_b"
