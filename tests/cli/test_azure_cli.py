"""``fleet up / status / down / check`` as subprocesses against the fake ARM server (backend: cloud).

The fake (tests/fakes/azure_arm.py) runs on a thread of the test process; the ``fleet`` command
reaches it through ``SPOTFLEET_AZURE_ARM_ENDPOINT`` with operation polling at 0 s, using the real
azure-mgmt clients. What only Azure has; the lifecycle every provider shares (up, rerun, kill -9
mid-up, down) is tests/cli/test_provider_lifecycle.py, in ``AzureWorld``.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from azure_arm import SUBSCRIPTION, ArmServer  # noqa: E402
from cli.azure_world import SPEC, AzureWorld  # noqa: E402


@pytest.fixture
def world(tmp_path: Path, arm_server: ArmServer) -> AzureWorld:
    return AzureWorld(tmp_path, arm_server)


def test_an_allocation_failure_re_plans_and_leaves_nothing_half_created(world: AzureWorld):
    world.control("capacity", {"target": "eastus/Standard_NC24ads_A100_v4/Spot", "count": 0})
    report = world.fleet_json("up", str(world.spec), "--yes")
    assert report["ok"], report
    assert any(f["error_kind"] == "capacity" and "AllocationFailed" in f["error_message"] for f in report["failures"])
    ours = world.ours()
    assert len(ours) == sum(report["desired"].values()) >= 4
    assert all(v["properties"]["provisioningState"] == "Succeeded" for v in ours)
    assert not any(
        v["tags"]["spotfleet:pool"].startswith("azure/eastus/") and v["tags"]["spotfleet:pool"].endswith("/spot")
        for v in ours
    )
    state = world.state()
    assert sorted(n["name"] for n in state["nics"]) == sorted(f"{v['name']}-nic" for v in ours)  # no orphan NIC
    assert any("/virtualMachines/" in d for d in state["deleted"])  # the Failed VM was removed
    world.fleet_json("down", "af", "--yes")
    assert world.ours() == [] and world.foreign_alive()


def test_fleet_check_azure_reports_identity_and_quota(world: AzureWorld):
    [res] = world.fleet_json("check", "azure", "--spec", str(world.spec))
    assert res["ok"] and res["can_price"] and res["can_launch"] and SUBSCRIPTION in res["identity"]
    assert any(k.startswith("lowPriorityCores ") for k in res["quotas"])
    bare = world.fleet("check", "azure", "--json")  # no spec, no $AZURE_SUBSCRIPTION_ID
    assert bare.returncode == 1 and "Traceback" not in bare.stderr
    [res] = json.loads(bare.stdout)
    assert not res["ok"] and "AZURE_SUBSCRIPTION_ID" in res["fix"] + res["detail"]


def test_up_with_azure_checkpoints_gives_nodes_the_account_uri_and_the_identity(world: AzureWorld):
    world.spec.write_text(SPEC + "checkpoint: {provider: azure, region: eastus, expire_days: 7}\n")
    report = world.fleet_json("up", str(world.spec), "--yes")
    assert report["ok"], report
    storage = world.control("storage/state")
    [account], [identity] = storage["accounts"], storage["identities"]
    [grant] = storage["role_assignments"]
    assert grant["properties"]["scope"].endswith("/blobServices/default/containers/af-checkpoints")
    uri = f"az://af-checkpoints@{account['name']}/af"
    for vm in world.ours():
        script = base64.b64decode(vm["properties"]["osProfile"]["customData"]).decode()
        assert uri in script and identity["properties"]["clientId"] in script
        assert {k.lower() for k in vm["identity"]["userAssignedIdentities"]} == {identity["id"].lower()}
    writes = storage["writes"]
    assert world.fleet_json("up", str(world.spec), "--yes")["launched"] == []
    assert world.control("storage/state")["writes"] == writes  # the rerun changed nothing
    world.fleet_json("down", "af", "--yes")
    assert world.ours() == [] and world.foreign_alive()
