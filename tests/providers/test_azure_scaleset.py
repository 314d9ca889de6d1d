"""The Azure adapter in ``launch_mode: scale-set``, driving the real azure-mgmt-compute client
against the fake ARM server (tests/fakes/azure_arm.py, scale sets in tests/fakes/azure_vmss.py)."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from azure_arm import SUBSCRIPTION  # noqa: E402
from support.azure_adapter import A100, ND, USER_KEY  # noqa: E402
from support.azure_adapter import SET_RG as RG  # noqa: E402
from support.azure_adapter import ScaleSetFake as Fake  # noqa: E402
from support.azure_adapter import set_offer as _offer  # noqa: E402
from support.azure_adapter import set_request as _request  # noqa: E402

from fleet.model import TAG_FLEET, TAG_POOL, InstanceState, Market, NodeConfig  # noqa: E402
from fleet.spec import FleetSpec  # noqa: E402
from providers.azure.arm import Arm  # noqa: E402
from providers.azure.provider import from_spec as build  # noqa: E402
from providers.azure.scaleset import set_name  # noqa: E402
from providers.azure.scaleset_provider import AzureScaleSetProvider  # noqa: E402
from providers.base import OfferQuery  # noqa: E402


@pytest.fixture
def fake(arm_server, tmp_path) -> Fake:
    return Fake(arm_server.url, tmp_path)


def test_the_spec_chooses_the_mode_and_refuses_an_unknown_one():
    spec = {
        "name": "mixfleet",
        "backend": "cloud",
        "capacity": {"gpus": 1, "accelerators": ["A100-80GB"]},
        "providers": {"azure": {"subscription_id": SUBSCRIPTION, "launch_mode": "scale-set"}},
    }
    parsed = FleetSpec.model_validate(spec)
    assert isinstance(build(parsed, parsed.providers["azure"]), AzureScaleSetProvider)
    spec["providers"]["azure"]["launch_mode"] = "fleet"
    with pytest.raises(ValueError, match="launch_mode"):
        FleetSpec.model_validate(spec)


def test_offers_are_regional_in_scale_set_mode(fake):
    offers = fake.provider().list_offers(OfferQuery())
    assert offers and all(o.pool.zone == "" for o in offers)
    ids = [o.pool.id for o in offers]
    assert len(ids) == len(set(ids))
    assert "azure/eastus/-/Standard_NC24ads_A100_v4/spot" in ids


def test_one_priority_mix_set_per_region_meets_the_request(fake):
    prov = fake.provider()
    spot, od, nd = _offer(prov), _offer(prov, market=Market.ON_DEMAND), _offer(prov, size=ND)
    node = NodeConfig(startup="python train.py")
    requests = [
        _request(spot, 5, "s1", max_price=1.25, node=node),
        _request(od, 2, "o1", node=node),
        _request(nd, 1, "n1", max_price=3.0, node=node),
    ]
    results = prov.launch_group(requests)
    assert [len(r.instances) for r in results] == [5, 2, 1]
    assert all(not r.error_kind for r in results)
    for req, res in zip(requests, results):
        assert {i.pool.id for i in res.instances} == {req.offer.pool.id}
        assert all(i.tags[TAG_FLEET] == "alpha" for i in res.instances)
    (vmss,) = fake.sets()
    assert vmss["name"] == set_name("alpha", "eastus")
    props, profile = vmss["properties"], vmss["properties"]["virtualMachineProfile"]
    assert props["orchestrationMode"] == "Flexible" and props["platformFaultDomainCount"] == 1
    assert props["priorityMixPolicy"] == {"baseRegularPriorityCount": 2, "regularPriorityPercentageAboveBase": 0}
    assert vmss["sku"] == {"name": "Mix", "capacity": 8}
    assert {s["name"] for s in props["skuProfile"]["vmSizes"]} == {A100, ND}
    assert props["skuProfile"]["allocationStrategy"] == "Prioritized"
    assert profile["priority"] == "Spot" and profile["evictionPolicy"] == "Delete"
    assert profile["billingProfile"] == {"maxPrice": 3.0}
    assert "python train.py" in base64.b64decode(profile["osProfile"]["customData"]).decode()
    assert vmss["tags"][TAG_FLEET] == "alpha"
    members = fake.members(vmss["name"])
    by = {}
    for vm in members:
        key = (vm["properties"]["hardwareProfile"]["vmSize"], vm["properties"]["priority"])
        by[key] = by.get(key, 0) + 1
    assert by == {(A100, "Spot"): 5, (A100, "Regular"): 2, (ND, "Spot"): 1}
    listed = prov.list_instances("alpha")
    assert sorted(i.id for i in listed) == sorted(v["name"] for v in members)
    assert all(i.state is InstanceState.RUNNING and i.tags[TAG_POOL] == i.pool.id for i in listed)


def test_a_repeated_request_does_not_grow_the_set_in_this_or_another_process(fake):
    prov = fake.provider()
    req = _request(_offer(prov), 3, "again")
    first = prov.launch_group([req])[0]
    assert prov.launch_group([req])[0].instances == first.instances
    other = fake.provider().launch_group([req])[0]
    assert sorted(i.id for i in other.instances) == sorted(i.id for i in first.instances)
    assert len(fake.members(set_name("alpha", "eastus"))) == 3
    assert fake.control("calls")["calls"]["PUT providers/microsoft.compute/virtualmachinescalesets"] == 1


def test_a_new_request_grows_the_same_set(fake):
    prov = fake.provider()
    prov.launch_group([_request(_offer(prov), 2, "a")])
    res = fake.provider().launch_group([_request(_offer(prov), 3, "b")])[0]
    assert len(res.instances) == 3
    (vmss,) = fake.sets()
    assert vmss["sku"]["capacity"] == 5 and len(fake.members(vmss["name"])) == 5


def test_spot_capacity_runs_out_the_shortfall_is_reported_and_a_fallback_size_counts(fake):
    fake.control("capacity", {"target": f"eastus/{A100}/Spot", "count": 3})
    prov = fake.provider()
    only = prov.launch_group([_request(_offer(prov), 5, "short")])[0]
    assert len(only.instances) == 3 and only.error_kind == "capacity" and only.error_code == "AllocationFailed"
    # with a second size in the region's skuProfile the set falls back to it, and that counts for its pool
    fake.control("reset", {"capacity": {f"eastus/{A100}/Spot": 2}})
    prov = fake.provider()
    a, n = prov.launch_group([_request(_offer(prov), 4, "a1"), _request(_offer(prov, size=ND), 2, "n1")])
    assert sorted(i.pool.instance_type for i in n.instances) == [ND, ND] and not n.error_kind
    assert len(a.instances) == 2 and a.error_kind == "capacity"
    assert len(fake.members(set_name("alpha", "eastus"))) == 4


def test_terminate_deletes_one_vm_and_down_deletes_the_empty_set_never_a_foreign_one(fake):
    foreign = fake.control("vmss_foreign", {"resource_group": RG, "location": "eastus", "size": A100, "count": 2})
    prov = fake.provider()
    res = prov.launch_group([_request(_offer(prov), 3, "t")])[0]
    ids = [i.id for i in res.instances]
    prov.terminate(ids[:1])
    name = set_name("alpha", "eastus")
    assert sorted(v["name"] for v in fake.members(name)) == sorted(ids[1:])
    assert next(s for s in fake.sets() if s["name"] == name)["sku"]["capacity"] == 2
    assert sorted(i.id for i in prov.list_instances("alpha")) == sorted(ids[1:])
    prov.terminate(ids[1:] + foreign["vms"])  # foreign VMs are refused, the empty set goes
    assert [s["name"] for s in fake.sets()] == [foreign["name"]]
    assert sorted(v["name"] for v in fake.members(foreign["name"])) == sorted(foreign["vms"])
    assert prov.list_instances("alpha") == []


def test_a_set_of_the_same_name_without_the_fleet_tag_is_not_touched(fake):
    prov = fake.provider()
    name = set_name("alpha", "eastus")
    fake.control("vmss_foreign", {"resource_group": RG, "location": "eastus", "size": A100, "count": 1, "name": name})
    res = prov.launch_group([_request(_offer(prov), 2, "f")])[0]
    assert res.error_code == "foreign-scale-set" and not res.instances
    assert fake.sets()[0]["sku"]["capacity"] == 1 and fake.sets()[0]["tags"] == {}


def test_a_bad_scale_set_body_gets_the_arm_error(fake):
    arm = Arm(SUBSCRIPTION, fake.url, polling_interval=0)
    arm.resources.resource_groups.create_or_update(RG, {"location": "eastus"})
    with pytest.raises(Exception) as err:
        arm.compute.virtual_machine_scale_sets.begin_create_or_update(
            RG,
            "bad",
            {
                "location": "eastus",
                "sku": {"name": A100, "capacity": 1},
                "properties": {
                    "orchestrationMode": "Flexible",
                    "platformFaultDomainCount": 1,
                    "priorityMixPolicy": {"baseRegularPriorityCount": 1},
                    "virtualMachineProfile": {"priority": "Regular"},
                },
            },
        ).result()
    assert "InvalidParameter" in str(err.value) and "priorityMixPolicy" in str(err.value)


def test_teardown_removes_a_set_whose_vms_were_all_evicted_then_the_network(fake):
    prov = fake.provider()
    offer = _offer(prov)
    keyed = _request(offer, 2, token="evicted", node=NodeConfig(ssh_key=USER_KEY))
    (result,) = prov.launch_group([keyed])
    assert len(result.instances) == 2
    nsg = next(n for n in fake.control("state")["nsgs"])
    assert any(r["properties"]["destinationPortRange"] == "22" for r in nsg["properties"]["securityRules"])
    for inst in result.instances:  # Azure evicts them all: nothing is left for `down` to terminate
        fake.control("evict", {"name": inst.id.rsplit("/", 1)[-1]})
    assert [i for i in prov.list_instances("alpha") if i.state.alive] == []
    gone = prov.teardown("alpha")
    assert set_name("alpha", "eastus") in gone
    state = fake.control("state")
    assert state["scale_sets"] == [] and state["vnets"] == [] and state["nsgs"] == []
    assert prov.teardown("alpha") == []  # idempotent
