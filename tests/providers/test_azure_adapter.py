"""The Azure adapter's own behaviour beyond the shared contract, with the real azure-mgmt clients
against the fake ARM server: offers from Resource SKUs, the VM it sends, throttling with
Retry-After, cleanup after a failed creation, idempotency across processes, terminate."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from azure_arm import SUBSCRIPTION  # noqa: E402
from support.azure_adapter import RG, Fake, _offer, _request  # noqa: E402

from fleet.errors import AuthError, NoCapacityError, ProviderError, QuotaExceededError  # noqa: E402
from fleet.model import InstanceState, Market, NodeConfig, fleet_tags  # noqa: E402
from providers.azure.arm import Arm, is_local  # noqa: E402
from providers.azure.errors import error_class  # noqa: E402
from providers.azure.instances import to_instance  # noqa: E402
from providers.azure.launch import IMAGE, tags_for, vm_names  # noqa: E402
from providers.base import OfferQuery  # noqa: E402


@pytest.fixture
def fake(arm_server, tmp_path) -> Fake:
    return Fake(arm_server.url, tmp_path)


def test_offers_follow_resource_skus_and_their_restrictions(fake):
    offers = fake.provider().list_offers(OfferQuery())
    places = {(o.pool.instance_type, o.pool.region, o.pool.zone) for o in offers}
    assert ("Standard_NC24ads_A100_v4", "eastus", "1") in places and (
        "Standard_NC24ads_A100_v4",
        "westus2",
        "",
    ) in places
    assert {z for t, r, z in places if t == "Standard_ND96asr_v4"} == {"1"}  # zone 2 is restricted
    assert not any(t == "Standard_NV36ads_A10_v5" for t, _, _ in places)  # the region is restricted
    only = fake.provider(regions=["westus2"], on_demand=False).list_offers(OfferQuery())
    assert only and {(o.pool.region, o.market) for o in only} == {("westus2", Market.SPOT)}


def test_offers_are_priced_from_retail_prices_linux_meters_and_fall_back_to_the_snapshot(fake, tmp_path):
    cache = tmp_path / "prices.json"
    spot = {
        (o.pool.region, o.pool.zone): o
        for o in fake.provider(cache).list_offers(OfferQuery(on_demand=False))
        if o.pool.instance_type == "Standard_NC24ads_A100_v4"
    }
    assert {o.price_per_hour for o in spot.values()} == {0.42}  # the Linux Spot meter
    assert all(o.source == "azure-retail-prices" and o.on_demand_price == 3.5 for o in spot.values())
    calls = fake.control("calls")["calls"]["GET api/retail/prices"]
    assert calls > 2  # NextPageLink was followed
    fake.control("faults", {"target": "prices", "kind": "server-error", "count": 100})
    cached = fake.provider(cache).list_offers(OfferQuery(on_demand=False))  # fresh on disk: no new call
    assert {o.source for o in cached} == {"azure-retail-prices"}
    assert fake.control("calls")["calls"]["GET api/retail/prices"] == calls
    fallback = fake.provider(tmp_path / "other.json").list_offers(OfferQuery(on_demand=False))
    assert fallback and {o.source for o in fallback} == {"snapshot"}
    assert {o.price_per_hour for o in fallback if o.pool.region == "westus2"} == {0.615962}


def test_the_vm_is_a_spot_vm_with_the_cap_the_tags_and_the_bootstrap(fake):
    provider = fake.provider()
    offer = _offer(provider)
    result = provider.launch(_request(offer, 1, node=NodeConfig(startup="python train.py"), max_price=0.5))
    [vm] = fake.control("state")["vms"]
    props = vm["properties"]
    assert vm["name"] == result.instances[0].id and vm["location"] == "westus2"
    assert props["priority"] == "Spot" and props["evictionPolicy"] == "Delete"
    assert props["billingProfile"] == {"maxPrice": 0.5}
    assert vm["tags"]["spotfleet:plan"] == "plan9" and vm["tags"]["spotfleet:token"] == "t1"
    assert "python train.py" in base64.b64decode(props["osProfile"]["customData"]).decode()
    assert props["networkProfile"]["networkInterfaces"][0]["properties"]["deleteOption"] == "Delete"
    [nic] = fake.control("state")["nics"]
    assert (
        nic["tags"]["spotfleet:fleet"] == "alpha" and nic["id"] == props["networkProfile"]["networkInterfaces"][0]["id"]
    )


def test_throttling_waits_the_retry_after_azure_names(fake):
    provider = fake.provider()
    offer = _offer(provider)
    fake.control("faults", {"target": "westus2/Standard_NC24ads_A100_v4/Spot", "kind": "throttle", "count": 2})
    assert len(provider.launch(_request(offer)).instances) == 2
    assert fake.sleeps == [1.0, 1.0]


@pytest.mark.parametrize("kind", ["capacity", "quota", "sku"])
def test_a_failed_creation_leaves_no_vm_and_no_nic(fake, kind):
    provider = fake.provider()
    offer = _offer(provider)
    fake.control("faults", {"target": "westus2/Standard_NC24ads_A100_v4/Spot", "kind": kind, "count": 1})
    if kind == "quota":
        with pytest.raises(QuotaExceededError) as err:
            provider.launch(_request(offer))
        assert err.value.code == "OperationNotAllowed"
    else:
        result = provider.launch(_request(offer))
        assert result.instances == () and result.error_kind == "capacity"
        assert result.error_code == ("AllocationFailed" if kind == "capacity" else "SkuNotAvailable")
    state = fake.control("state")
    assert state["vms"] == [] and state["nics"] == []


def test_a_rerun_in_another_process_creates_only_what_is_missing(fake):
    offer = _offer(fake.provider())
    fake.control("capacity", {"target": "westus2/Standard_NC24ads_A100_v4/Spot", "count": 2})
    first = fake.provider().launch(_request(offer, 3, token="tx"))
    assert len(first.instances) == 2 and first.error_kind == "capacity"
    fake.control("capacity", {"target": "westus2/Standard_NC24ads_A100_v4/Spot", "count": 10})
    second = fake.provider().launch(_request(offer, 3, token="tx"))  # a fresh process: no memory
    assert len(second.instances) == 3 and {i.id for i in first.instances} < {i.id for i in second.instances}
    assert len(fake.control("state")["vms"]) == 3
    with pytest.raises(ProviderError) as err:
        fake.provider().launch(_request(offer, 4, token="tx"))
    assert err.value.code == "token-mismatch"


def test_terminate_deletes_the_vm_and_its_nic_and_leaves_foreign_ones(fake):
    provider = fake.provider()
    offer = _offer(provider)
    ids = [i.id for i in provider.launch(_request(offer)).instances]
    theirs = fake.control(
        "foreign", {"resource_group": RG, "location": "westus2", "count": 1, "size": offer.pool.instance_type}
    )["names"]
    provider.terminate([*ids, *theirs, "sf-000000000000-9"])
    state = fake.control("state")
    assert [v["name"] for v in state["vms"]] == theirs and state["nics"] == []
    assert provider.list_instances("alpha") == []


def test_an_evicted_spot_vm_is_listed_as_stopped_by_eviction():
    vm = {
        "name": "sf-1-0",
        "tags": fleet_tags("alpha", _pool()),
        "properties": {
            "priority": "Spot",
            "provisioningState": "Succeeded",
            "instanceView": {"statuses": [{"code": "PowerState/deallocated"}]},
        },
    }
    inst = to_instance(vm, 1.7e9, {})
    assert inst is not None and inst.state is InstanceState.STOPPED and inst.reason == "evicted"
    assert to_instance({**vm, "tags": {}}, 1.7e9, {}) is None


def _pool():
    from fleet.model import PoolKey

    return PoolKey(
        provider="azure", region="eastus", zone="1", instance_type="Standard_NC24ads_A100_v4", market=Market.SPOT
    )


def test_errors_and_endpoints():
    for code in ("AllocationFailed", "ZonalAllocationFailed", "OverconstrainedAllocationRequest", "SkuNotAvailable"):
        assert error_class(None, code) is NoCapacityError
    assert error_class(409, "OperationNotAllowed") is QuotaExceededError
    assert is_local("http://127.0.0.1:9") and not is_local("https://127.0.0.1:9") and not is_local("http://example.com")
    with pytest.raises(AuthError) as err:
        Arm.from_env("", environ={})
    assert "subscription_id" in str(err.value) and "AZURE_SUBSCRIPTION_ID" in str(err.value)


def test_a_nic_left_by_a_killed_launch_is_swept_by_the_next_one(fake):
    provider = fake.provider()
    offer = _offer(provider)
    provider.launch(_request(offer, 1, token="first"))
    [nic] = fake.control("state")["nics"]
    orphan = {**nic, "name": "sf-dead00000000-0-nic", "tags": {**nic["tags"], "spotfleet:token": "killed"}}
    base = nic["id"].rsplit("/", 1)[0]
    httpx.put(
        f"{fake.url}{base}/{orphan['name']}?api-version=2024-05-01",
        json={k: orphan[k] for k in ("location", "tags", "properties")},
    ).raise_for_status()
    assert len(fake.control("state")["nics"]) == 2
    fake.provider().launch(_request(offer, 1, token="second"))  # a new process, same region
    names = sorted(n["name"] for n in fake.control("state")["nics"])
    assert names == sorted(f"{v['name']}-nic" for v in fake.control("state")["vms"]) and len(names) == 2


def test_a_failed_vm_left_by_a_killed_run_is_replaced_not_counted(fake):
    provider = fake.provider()
    offer = _offer(provider)
    request = _request(offer, 1, token="tf")
    name = vm_names("tf", 1)[0]
    fake.control("capacity", {"target": "westus2/Standard_NC24ads_A100_v4/Spot", "count": 0})
    group = f"{fake.url}/subscriptions/{SUBSCRIPTION}/resourceGroups/{RG}"
    httpx.put(f"{group}?api-version=2024-03-01", json={"location": "westus2"}).raise_for_status()
    made = httpx.put(
        f"{group}/providers/Microsoft.Compute/virtualMachines/{name}?api-version=2024-07-01",
        json={
            "location": "westus2",
            "tags": tags_for(request),
            "properties": {
                "hardwareProfile": {"vmSize": offer.pool.instance_type},
                "priority": "Spot",
                "storageProfile": {"imageReference": IMAGE},
            },
        },
    )
    httpx.get(made.headers["Azure-AsyncOperation"])
    httpx.get(made.headers["Azure-AsyncOperation"]).raise_for_status()
    assert [v["properties"]["provisioningState"] for v in fake.control("state")["vms"]] == ["Failed"]
    fake.control("capacity", {"target": "westus2/Standard_NC24ads_A100_v4/Spot", "count": 5})
    [inst] = fake.provider().launch(request).instances
    assert inst.id == name and inst.state is InstanceState.RUNNING
    assert [v["properties"]["provisioningState"] for v in fake.control("state")["vms"]] == ["Succeeded"]


def test_vms_created_in_parallel_stop_at_capacity_and_leave_nothing_half_made(fake):
    provider = fake.provider()
    offer = _offer(provider)
    fake.control("capacity", {"target": "westus2/Standard_NC24ads_A100_v4/Spot", "count": 5})
    result = provider.launch(_request(offer, 12, token="wide"))
    assert len(result.instances) == 5 and result.error_kind == "capacity" and result.error_code == "AllocationFailed"
    state = fake.control("state")
    assert sorted(v["name"] for v in state["vms"]) == sorted(i.id.rsplit("/", 1)[-1] for i in result.instances)
    assert len(state["nics"]) == 5  # every failed attempt's NIC went with it
    assert all(v["properties"]["provisioningState"] != "Failed" for v in state["vms"])


# ---- proximity placement groups (LaunchRequest.interconnect) -----------------------------


def test_an_interconnect_launch_puts_every_vm_in_one_proximity_group_of_its_region(fake):
    provider = fake.provider()
    offer = _offer(provider)
    provider.launch(_request(offer, count=2, token="ppg-1", interconnect="spotfleet-ppg-test"))
    provider.launch(_request(offer, count=1, token="ppg-2", interconnect="spotfleet-ppg-test"))
    state = fake.control("state")
    (group,) = state["ppgs"]
    assert group["location"] == offer.pool.region and group["tags"] == {"spotfleet:fleet": "alpha"}
    assert len(group["properties"]["virtualMachines"]) == 3
    assert all(vm["properties"]["proximityPlacementGroup"]["id"] == group["id"] for vm in state["vms"])
    with pytest.raises(ProviderError, match="while virtual machines"):
        _delete_group(fake, group["name"])  # Azure refuses while VMs are in it
    assert provider.teardown("alpha") == [] or fake.control("state")["ppgs"]  # VMs still run: nothing goes
    provider.terminate([i.id for i in provider.list_instances("alpha")])
    assert "spotfleet-ppg-test" in provider.teardown("alpha")
    assert fake.control("state")["ppgs"] == []


def _delete_group(fake: Fake, name: str) -> None:
    provider = fake.provider()
    provider.arm.call(lambda: provider.arm.compute.proximity_placement_groups.delete(RG, name), f"delete {name}")


def test_a_group_of_that_name_in_another_region_is_refused_and_the_fake_refuses_such_a_vm(fake):
    """Azure keeps a proximity placement group in one location: the adapter will not use one of
    another region, and ARM (the fake) refuses a VM that names one."""
    provider = fake.provider()
    east, west = _offer(provider, region="eastus"), _offer(provider)
    provider.launch(_request(east, count=1, token="ppg-east", interconnect="spotfleet-ppg-x"))
    with pytest.raises(ProviderError, match="is in eastus, not westus2"):
        provider.launch(_request(west, count=1, token="ppg-west", interconnect="spotfleet-ppg-x"))
    group_id = fake.control("state")["ppgs"][0]["id"]
    vm = next(v for v in fake.control("state")["vms"])
    body = {
        "location": "westus2",
        "properties": {
            **{
                k: v
                for k, v in vm["properties"].items()
                if k in ("hardwareProfile", "storageProfile", "osProfile", "networkProfile", "priority")
            },
            "proximityPlacementGroup": {"id": group_id},
        },
    }
    resp = httpx.put(
        f"{fake.url}/subscriptions/{SUBSCRIPTION}/resourceGroups/{RG}/providers/Microsoft.Compute/"
        "virtualMachines/elsewhere",
        json=body,
    )
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "InvalidParameter"
