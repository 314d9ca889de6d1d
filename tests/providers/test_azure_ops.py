"""The Azure adapter's operations beyond launching, with the real azure-mgmt clients against the fake
ARM server: eviction under either eviction policy and its date, the fleet's NSG, removing the
fleet's network."""

from __future__ import annotations

import time

import httpx
import pytest
from support.azure_adapter import RG, SUBSCRIPTION, USER_KEY, Fake, _offer, _request

from fleet.model import InstanceState, LaunchRequest, Market, NodeConfig, fleet_tags
from providers.azure.instances import OS_DISK_PER_HOUR
from providers.azure.settings import AzureSettings
from providers.base import OfferQuery

EVICTED_AT = int(time.time()) - 3600  # the epoch second the fake dates an eviction with


@pytest.fixture
def fake(arm_server, tmp_path) -> Fake:
    return Fake(arm_server.url, tmp_path)


def test_eviction_policy_is_validated_and_defaults_to_delete():
    assert AzureSettings().eviction_policy == "Delete"
    with pytest.raises(ValueError, match="eviction_policy"):
        AzureSettings(eviction_policy="Stop")


def test_a_deallocated_eviction_is_an_interruption_dated_by_azure_and_terminate_deletes_it(fake):
    provider = fake.provider(eviction_policy="Deallocate")
    offer = _offer(provider)
    gone, kept = [i.id for i in provider.launch(_request(offer, 2)).instances]
    assert {v["properties"]["evictionPolicy"] for v in fake.control("state")["vms"]} == {"Deallocate"}
    fake.control("evict", {"name": gone, "at": EVICTED_AT})
    listed = {i.id: i for i in provider.list_instances("alpha")}
    assert listed[kept].state is InstanceState.RUNNING
    evicted = listed[gone]
    assert evicted.state is InstanceState.STOPPED and not evicted.state.alive and evicted.reason == "evicted"
    assert evicted.ended_at == EVICTED_AT and evicted.price_per_hour == OS_DISK_PER_HOUR
    assert gone in {v["name"] for v in fake.control("state")["vms"]}  # Azure kept it, deallocated
    provider.terminate([gone])
    state = fake.control("state")
    assert [v["name"] for v in state["vms"]] == [kept]
    assert [n["name"] for n in state["nics"]] == [f"{kept}-nic"]


def test_a_deleted_eviction_is_dated_from_the_activity_log(fake):
    provider = fake.provider()
    offer = _offer(provider)
    gone, kept = [i.id for i in provider.launch(_request(offer, 2)).instances]
    fake.control("evict", {"name": gone, "at": EVICTED_AT})
    assert [i.id for i in provider.list_instances("alpha")] == [kept]
    assert [n["name"] for n in fake.control("state")["nics"]] == [f"{kept}-nic"]  # the NIC went with it
    assert provider.ended_at([gone, kept, "sf-000000000000-0"]) == {gone: EVICTED_AT}
    fake.control("evict", {"name": kept, "at": EVICTED_AT - 30 * 86400})  # older than the log is read
    assert provider.ended_at([gone, kept]) == {gone: EVICTED_AT}


def test_simulate_eviction_through_the_sdk_evicts_by_the_policy(fake):
    provider = fake.provider(eviction_policy="Deallocate")
    [vm] = [i.id for i in provider.launch(_request(_offer(provider), 1)).instances]
    provider.arm.compute.virtual_machines.simulate_eviction(RG, vm)
    [inst] = provider.list_instances("alpha")
    assert inst.state is InstanceState.STOPPED and inst.reason == "evicted" and inst.ended_at is not None


def _nsg(state: dict, fleet: str = "alpha") -> dict:
    [nsg] = [n for n in state["nsgs"] if n["tags"].get("spotfleet:fleet") == fleet]
    return nsg


def test_the_subnet_sits_behind_a_tagged_nsg_without_inbound_rules(fake):
    provider = fake.provider()
    provider.launch(_request(_offer(provider), 1))
    state = fake.control("state")
    nsg = _nsg(state)
    assert nsg["name"] == "spotfleet-alpha-westus2-nsg" and nsg["location"] == "westus2"
    assert nsg["properties"]["securityRules"] == []  # Azure's DenyAllInBound refuses the rest
    assert "DenyAllInBound" in {r["name"] for r in nsg["properties"]["defaultSecurityRules"]}
    [vnet] = state["vnets"]
    [subnet] = vnet["properties"]["subnets"]
    assert subnet["properties"]["networkSecurityGroup"]["id"] == nsg["id"]


def test_an_ssh_key_opens_tcp_22_and_only_that_and_a_rerun_converges(fake):
    provider = fake.provider()
    offer = _offer(provider)
    provider.launch(_request(offer, 1, token="no-key"))
    assert _nsg(fake.control("state"))["properties"]["securityRules"] == []
    keyed = _request(offer, 1, token="key", node=NodeConfig(ssh_key=USER_KEY))
    fake.provider().launch(keyed)  # a new process with the key in the spec
    [rule] = _nsg(fake.control("state"))["properties"]["securityRules"]
    props = rule["properties"]
    assert (props["direction"], props["access"], props["protocol"], props["destinationPortRange"]) == (
        "Inbound",
        "Allow",
        "Tcp",
        "22",
    )
    puts = fake.control("calls")["calls"]
    fake.provider().launch(keyed.model_copy(update={"token": "key2"}))
    again = fake.control("calls")["calls"]
    nsg_puts = "PUT providers/microsoft.network/networksecuritygroups"
    vnet_puts = "PUT providers/microsoft.network/virtualnetworks"
    assert again[nsg_puts] == puts[nsg_puts] == 2 and again[vnet_puts] == 1  # found as it should be: no PUT


def test_teardown_removes_the_fleets_network_only_where_none_of_its_vms_is_left(fake):
    provider = fake.provider()
    assert provider.teardown("alpha") == []  # no resource group yet: nothing
    west = _offer(provider)
    east = next(o for o in provider.list_offers(OfferQuery()) if o.pool.region == "eastus" and o.market is Market.SPOT)
    [w] = [i.id for i in provider.launch(_request(west, 1, token="w")).instances]
    provider.launch(_request(east, 1, token="e"))
    theirs = LaunchRequest(fleet="beta", offer=west, count=1, token="b", tags=fleet_tags("beta", west.pool))
    provider.launch(theirs)
    group = f"{fake.url}/subscriptions/{SUBSCRIPTION}/resourceGroups/{RG}/providers/Microsoft.Network"
    httpx.put(
        f"{group}/networkSecurityGroups/spotfleet-alpha-westus3-nsg?api-version=2024-05-01",
        json={"location": "westus3", "properties": {}},
    ).raise_for_status()  # untagged: not ours
    [e] = [i.id for i in provider.list_instances("alpha") if i.pool.region == "eastus"]
    provider.terminate([e])
    assert provider.teardown("alpha") == ["spotfleet-alpha-eastus", "spotfleet-alpha-eastus-nsg"]
    state = fake.control("state")
    assert sorted(v["name"] for v in state["vnets"]) == ["spotfleet-alpha-westus2", "spotfleet-beta-westus2"]
    assert "spotfleet-alpha-westus3-nsg" in {n["name"] for n in state["nsgs"]}
    provider.terminate([w])
    assert provider.teardown("alpha") == ["spotfleet-alpha-westus2", "spotfleet-alpha-westus2-nsg"]
    assert provider.teardown("alpha") == []
    state = fake.control("state")
    assert [v["name"] for v in state["vnets"]] == ["spotfleet-beta-westus2"]
    assert sorted(n["name"] for n in state["nsgs"]) == ["spotfleet-alpha-westus3-nsg", "spotfleet-beta-westus2-nsg"]
    assert len(provider.launch(_request(west, 1, token="w2")).instances) == 1  # the same process rebuilds it


def test_quotas_per_region_spot_regional_and_on_demand_per_family_from_the_usage_api(fake):
    fake.control("quota", {"target": "westus2/lowPriorityCores", "limit": 48})
    provider = fake.provider()
    provider.launch(_request(_offer(provider), 1))
    quotas = {(q.region, q.name): q for q in provider.quotas()}
    spot = quotas[("westus2", "lowPriorityCores")]
    assert (spot.market, spot.unit.value, spot.limit, spot.in_use, spot.instance_types) == (
        Market.SPOT,
        "vcpus",
        48,
        24,
        (),
    )
    family = quotas[("eastus", "standardNCADSA100v4Family")]
    assert family.market is Market.ON_DEMAND and family.instance_types == ("Standard_NC24ads_A100_v4",)
    assert quotas[("eastus", "cores")].market is Market.ON_DEMAND
    assert {r for r, _ in quotas} == {"eastus", "westus2"}  # the regions with a GPU size offered
    only = fake.provider(regions=["westus2"]).quotas()
    assert {q.region for q in only} == {"westus2"}
    offers = provider.list_offers(OfferQuery(regions=("westus2",), on_demand=False))
    assert offers and all(spot.covers(o) and spot.units(o) == 24 for o in offers)


def test_a_launch_past_the_spot_vcpu_quota_stops_there_as_a_quota_shortfall(fake):
    fake.control("quota", {"target": "westus2/lowPriorityCores", "limit": 24})
    provider = fake.provider()
    result = provider.launch(_request(_offer(provider), 2))
    assert len(result.instances) == 1 and result.error_kind == "quota" and result.error_code == "OperationNotAllowed"
    assert "lowPriorityCores" in result.error_message
    state = fake.control("state")
    assert len(state["vms"]) == 1 and len(state["nics"]) == 1  # the refused VM's NIC is gone
