"""``fleet up / status / down`` in ``providers.azure.launch_mode: scale-set`` as subprocesses against
the fake ARM server: one Flexible priority-mix scale set per region, driven by the real azure-mgmt clients."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli.azure_world import RG, ArmServer, AzureWorld
from cli.azure_world import SCALE_SET_SPEC as SPEC

from fleet.state import LaunchStatus, open_store


@pytest.fixture
def world(tmp_path: Path, arm_server: ArmServer) -> AzureWorld:
    w = AzureWorld(tmp_path, arm_server)
    w.spec.write_text(SPEC)
    w.foreign_set = w.control(
        "vmss_foreign", {"resource_group": RG, "location": "eastus", "count": 2, "size": "Standard_NC24ads_A100_v4"}
    )
    return w


def _members(world: AzureWorld) -> list[dict]:
    sets = {s["id"].lower(): s for s in world.state()["scale_sets"] if s["tags"].get("spotfleet:fleet") == "af"}
    return [
        v
        for v in world.state()["vms"]
        if (v["properties"].get("virtualMachineScaleSet") or {}).get("id", "").lower() in sets
    ]


def test_up_makes_one_priority_mix_set_per_region_status_and_down_follow(world: AzureWorld):
    report = world.fleet_json("up", str(world.spec), "--yes")
    assert report["ok"], report
    desired = report["desired"]
    assert all(p.split("/")[2] == "-" for p in desired)  # regional pools in this mode
    sets = [s for s in world.state()["scale_sets"] if s["tags"].get("spotfleet:fleet") == "af"]
    regions = {p.split("/")[1] for p in desired}
    assert sorted(s["location"] for s in sets) == sorted(regions)  # one set per region
    members = _members(world)
    assert len(members) == sum(desired.values()) and world.ours() == []  # no single VMs
    for s in sets:
        on_demand = sum(n for p, n in desired.items() if p.split("/")[1] == s["location"] and p.endswith("/on-demand"))
        mine = [v for v in members if v["location"] == s["location"]]
        assert s["properties"]["priorityMixPolicy"]["baseRegularPriorityCount"] == on_demand
        assert sum(v["properties"]["priority"] == "Regular" for v in mine) == on_demand
        assert s["properties"]["virtualMachineProfile"]["osProfile"]["customData"]
    assert any(p.endswith("/on-demand") for p in desired) and any(p.endswith("/spot") for p in desired)
    again = world.fleet_json("up", str(world.spec), "--yes")
    assert again["ok"] and again["launched"] == [] and again["terminated"] == []
    assert {v["name"] for v in _members(world)} == {v["name"] for v in members}
    status = world.fleet_json("status", "af")
    assert status["running"] == status["planned"] == sum(desired.values())
    down = world.fleet_json("down", "af", "--yes")
    assert sorted(down["terminated"]) == sorted(v["name"] for v in members) and down["remaining"] == []
    state = world.state()
    assert [s["name"] for s in state["scale_sets"]] == [world.foreign_set["name"]]  # ours deleted when empty
    assert set(world.foreign_set["vms"]) <= {v["name"] for v in state["vms"]} and world.foreign_alive()


def test_killed_mid_up_a_rerun_converges_without_a_second_set(world: AzureWorld):
    crashed = world.fleet("up", str(world.spec), "--yes", SPOTFLEET_TEST_CRASH_AT="launch-sent:1")
    assert crashed.returncode == 137, crashed.stderr
    rerun = world.fleet_json("up", str(world.spec), "--yes")
    assert rerun["ok"], rerun
    assert len(_members(world)) == sum(rerun["desired"].values())
    names = [s["name"] for s in world.state()["scale_sets"] if s["tags"].get("spotfleet:fleet") == "af"]
    assert len(names) == len(set(names)) == len({p.split("/")[1] for p in rerun["desired"]})
    store = open_store(str(world.home / "state.db"), create=False)
    try:  # the killed run's launches are abandoned, not replayed; its VMs are known
        assert {r.id for r in store.instances("af", alive_only=True)} == {v["name"] for v in _members(world)}
        assert store.launches("af", status=LaunchStatus.REQUESTED) == []
        assert store.launches("af", status=LaunchStatus.ABANDONED)
    finally:
        store.close()
    world.fleet_json("down", "af", "--yes")
    assert _members(world) == [] and world.foreign_alive()
