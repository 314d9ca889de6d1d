"""A user's first `fleet up` / `rebalance` / `down` on Azure, as subprocesses against the fake ARM
server: a two-region spec on a resource group that does not exist yet, scale sets whether or not
Azure copies a set's tags onto its VMs, and the replacement of an evicted scale-set VM."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli.azure_world import RG, SPEC, ArmServer, AzureWorld
from cli.azure_world import SCALE_SET_SPEC as SCALE_SET

TWO_REGIONS = SPEC.replace(
    "diversification:\n", "diversification:\n  max_region_share: 0.6\n"
)  # both regions get some of the fleet
#: 4 GPUs over the two regional spot pools (eastus, westus2), nothing on-demand.
SCALE_SET_SPOT = SCALE_SET.replace("gpus: 6", "gpus: 4").replace("on_demand_gpus: 1", "on_demand_gpus: 0")


def _world(tmp_path: Path, arm_server: ArmServer, spec: str, **reset) -> AzureWorld:
    world = AzureWorld(tmp_path, arm_server)
    world.control("reset", reset)  # no foreign VMs: the resource group does not exist yet
    world.foreign = []
    world.spec.write_text(spec)
    return world


def _members(world: AzureWorld) -> list[dict]:
    sets = {s["id"].lower() for s in world.state()["scale_sets"] if s["tags"].get("spotfleet:fleet") == "af"}
    return [
        v
        for v in world.state()["vms"]
        if (v["properties"].get("virtualMachineScaleSet") or {}).get("id", "").lower() in sets
    ]


def test_the_first_up_of_a_two_region_spec_creates_the_group_once_and_fills_both_regions(tmp_path, arm_server):
    # both regions' existence checks are held until both arrived: without one lock for the group
    # both would find it missing and PUT it in their own region, and ARM would refuse the second
    world = _world(tmp_path, arm_server, TWO_REGIONS, group_gate=2)
    report = world.fleet_json("up", str(world.spec), "--yes")
    assert report["ok"] and not report["failures"], report
    regions = {p.split("/")[1] for p in report["desired"]}
    assert regions == {"eastus", "westus2"}
    assert {v["location"] for v in world.ours()} == regions and len(world.ours()) == sum(report["desired"].values())
    [group] = world.state()["groups"]
    assert group["name"] == RG and group["location"] in regions
    world.fleet_json("down", "af", "--yes")
    assert world.ours() == []


@pytest.mark.parametrize("propagate", [False, True], ids=["set-tags-stay-on-the-set", "set-tags-propagate"])
def test_scale_set_mode_finds_its_vms_by_their_set_whether_or_not_azure_copies_the_tags(
    tmp_path, arm_server, propagate: bool
):
    world = _world(tmp_path, arm_server, SCALE_SET, vmss_tags_propagate=propagate)
    report = world.fleet_json("up", str(world.spec), "--yes")
    assert report["ok"], report
    members = _members(world)
    assert len(members) == sum(report["desired"].values())
    assert all(bool(v["tags"].get("spotfleet:fleet")) is propagate for v in members)  # the fake's switch
    again = world.fleet_json("up", str(world.spec), "--yes")
    assert again["ok"] and again["launched"] == [] and again["terminated"] == []  # the sets are not grown
    assert {v["name"] for v in _members(world)} == {v["name"] for v in members}
    status = world.fleet_json("status", "af")
    assert status["running"] == status["planned"] == len(members)
    down = world.fleet_json("down", "af", "--yes")
    assert sorted(down["terminated"]) == sorted(v["name"] for v in members) and down["remaining"] == []
    assert world.state()["vms"] == [] and world.state()["scale_sets"] == []


def test_rebalance_replaces_an_evicted_scale_set_vm(tmp_path, arm_server):
    world = _world(tmp_path, arm_server, SCALE_SET_SPOT)
    report = world.fleet_json("up", str(world.spec), "--yes")
    assert report["ok"], report
    before = _members(world)
    assert len(before) == 4 and len({v["location"] for v in before}) == 2  # two regional pools
    evicted = before[0]
    world.control("evict", {"name": evicted["name"]})  # evictionPolicy Delete
    assert len(_members(world)) == 3
    passed = world.fleet("rebalance", "af")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "launch 1 in azure/" in passed.stdout and "4 of 4 weighted GPUs running (at target)" in passed.stdout
    after = _members(world)
    assert len(after) == 4 and evicted["name"] not in {v["name"] for v in after}
    assert [v["location"] for v in after].count(evicted["location"]) == 2  # refilled where it was lost
    assert world.fleet_json("status", "af")["running"] == 4
    world.fleet_json("down", "af", "--yes")
    assert world.state()["vms"] == []
