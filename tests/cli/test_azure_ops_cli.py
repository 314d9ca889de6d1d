"""``fleet plan / status / down`` against the fake ARM server for Azure's operations: the Spot vCPU
quota from the usage API binds the plan, and a VM evicted under evictionPolicy Deallocate is shown
as stopped (still billing its disk) until ``fleet down`` deletes it with the fleet's network."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli.azure_world import SPEC, AzureWorld


@pytest.fixture
def world(tmp_path: Path, arm_server) -> AzureWorld:
    return AzureWorld(tmp_path, arm_server)


def test_the_spot_vcpu_quota_binds_the_plan_and_its_shortfall_names_it(world: AzureWorld):
    world.spec.write_text(SPEC.replace("resource_group: fleetrg", "resource_group: fleetrg, on_demand: false"))
    world.control("quota", {"target": "eastus/lowPriorityCores", "limit": 48})  # the foreign VM holds 24
    world.control("quota", {"target": "westus2/lowPriorityCores", "limit": 24})
    plan = world.fleet_json("plan", str(world.spec), ok=(3,))  # 3: the spec cannot be met
    assert plan["feasible"] is False
    assert sum(a["count"] for a in plan["allocations"]) == 2  # one node per region
    assert "lowPriorityCores" in plan["shortfall"] and "vCPUs" in plan["shortfall"]
    world.control("quota", {"target": "eastus/lowPriorityCores", "limit": 1000})
    assert world.fleet_json("plan", str(world.spec))["feasible"] is True


def test_a_deallocated_eviction_is_stopped_until_down_deletes_it_and_the_network(world: AzureWorld):
    world.spec.write_text(
        SPEC.replace("resource_group: fleetrg", "resource_group: fleetrg, eviction_policy: Deallocate")
    )
    world.fleet_json("up", str(world.spec), "--yes")
    spot = [v for v in world.ours() if v["properties"].get("priority") == "Spot"]
    assert spot and {v["properties"]["evictionPolicy"] for v in spot} == {"Deallocate"}
    world.control("evict", {"name": spot[0]["name"]})
    status = world.fleet_json("status", "af", "--check", ok=(3,))  # --check: 3, short of the plan
    [held] = status["stopped"]
    assert held["id"] == spot[0]["name"] and held["reason"] == "evicted"
    assert spot[0]["name"] not in {i["id"] for i in status["instances"]}
    down = world.fleet_json("down", "af", "--yes")
    assert spot[0]["name"] in down["terminated"] and down["remaining"] == []
    state = world.state()
    assert world.ours() == [] and state["nics"] == [] and state["vnets"] == [] and state["nsgs"] == []
    assert world.foreign_alive()
