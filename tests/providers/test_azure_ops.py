"""The Azure adapter's operations beyond launching, with the real azure-mgmt clients against the fake
ARM server: eviction under either eviction policy and its date."""

from __future__ import annotations

import time

import pytest
from test_azure_adapter import RG, Fake, _offer, _request, server  # noqa: F401  (server: the fixture)

from fleet.model import InstanceState
from fleet.spec import ProviderSettings
from providers.azure.instances import OS_DISK_PER_HOUR

EVICTED_AT = int(time.time()) - 3600      # the epoch second the fake dates an eviction with


@pytest.fixture
def fake(server) -> Fake:  # noqa: F811
    return Fake(server.url)


def test_eviction_policy_is_validated_and_defaults_to_delete():
    assert ProviderSettings().eviction_policy == "Delete"
    with pytest.raises(ValueError, match="eviction_policy"):
        ProviderSettings(eviction_policy="Stop")


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
    assert gone in {v["name"] for v in fake.control("state")["vms"]}            # Azure kept it, deallocated
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
    assert [n["name"] for n in fake.control("state")["nics"]] == [f"{kept}-nic"]      # the NIC went with it
    assert provider.ended_at([gone, kept, "sf-000000000000-0"]) == {gone: EVICTED_AT}
    fake.control("evict", {"name": kept, "at": EVICTED_AT - 30 * 86400})       # older than the log is read
    assert provider.ended_at([gone, kept]) == {gone: EVICTED_AT}


def test_simulate_eviction_through_the_sdk_evicts_by_the_policy(fake):
    provider = fake.provider(eviction_policy="Deallocate")
    [vm] = [i.id for i in provider.launch(_request(_offer(provider), 1)).instances]
    provider.arm.compute.virtual_machines.simulate_eviction(RG, vm)
    [inst] = provider.list_instances("alpha")
    assert inst.state is InstanceState.STOPPED and inst.reason == "evicted" and inst.ended_at is not None
