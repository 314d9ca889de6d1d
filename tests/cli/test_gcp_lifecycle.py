"""`fleet up / status / down` on `backend: cloud` with only GCP enabled, as real subprocesses
against the fake Compute Engine server and fake-gcs-server: the fleet meets its spec, a rerun
changes nothing, a kill -9 mid-up converges on rerun, a zone out of capacity is re-planned
around, and a VM that is not the fleet's is never touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes.gce_server import GceServer, control  # noqa: E402
from fakes.storage_emulators import EmulatorUnavailable, in_ci, start_fake_gcs  # noqa: E402

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))

SPEC = """
name: gcpfleet
backend: cloud
capacity:
  gpus: 6
  accelerators: {T4: 1.0}
  gpus_per_node: {min: 1, max: 1}
diversification: {min_pools: 3, max_pool_share: 0.34}
providers:
  gcp: {project: spec-project, regions: [us-central1], on_demand: false}
checkpoint: {provider: gcs, bucket: gcpfleet-checkpoints, expire_days: 7}
node: {startup: "python train.py"}
"""


@pytest.fixture(scope="module")
def gcs():
    try:
        emulator = start_fake_gcs()
    except EmulatorUnavailable as err:
        if in_ci():
            raise
        pytest.skip(str(err))
    yield emulator
    emulator.stop()


class Cloud:
    def __init__(self, root: Path, gce: GceServer, gcs):
        self.root, self.url = root, gce.url
        self.spec = root / "gcpfleet.yaml"
        self.spec.write_text(SPEC)
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GOOGLE_", "CLOUDSDK_", "SPOTFLEET_")) and k != "STORAGE_EMULATOR_HOST"
        }
        self.env.update(
            SPOTFLEET_HOME=str(root / "home"),
            SPOTFLEET_GCE_ENDPOINT=gce.url,
            COLUMNS="200",
            NO_COLOR="1",
            STORAGE_EMULATOR_HOST=gcs.env["STORAGE_EMULATOR_HOST"],
        )

    def fleet(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [FLEET_BIN, *args],
            env={**self.env, **extra},
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )

    def fleet_json(self, *args: str, **extra: str):
        proc = self.fleet(*args, "--json", **extra)
        assert proc.returncode == 0, f"{args} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return json.loads(proc.stdout)

    def vms(self) -> list[dict]:
        return control(self.url, "instances")["instances"]

    def ours(self) -> dict[str, int]:
        """Live VMs of the fleet per zone, as the fake sees them."""
        out: dict[str, int] = {}
        for vm in self.vms():
            if vm.get("labels", {}).get("spotfleet-fleet") == "gcpfleet" and vm["status"] != "TERMINATED":
                zone = vm["zone"].rsplit("/", 1)[-1]
                out[zone] = out.get(zone, 0) + 1
        return out

    def ever_created(self) -> int:
        state = control(self.url, "instances")
        return sum(
            1 for vm in state["instances"] + state["ended"] if vm.get("labels", {}).get("spotfleet-fleet") == "gcpfleet"
        )


@pytest.fixture
def cloud(tmp_path, gce, gcs) -> Cloud:
    control(gce.url, "reset", {})
    return Cloud(tmp_path, gce, gcs)


def _zones(report: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for pool, n in report["desired"].items():
        zone = pool.split("/")[2]
        out[zone] = out.get(zone, 0) + n
    return out


def test_up_meets_the_spec_a_rerun_changes_nothing_and_down_spares_a_foreign_vm(cloud):
    control(cloud.url, "foreign", {"zone": "us-central1-a", "name": "someone-elses", "machineType": "n1-standard-4"})
    report = cloud.fleet_json("up", str(cloud.spec), "--yes")
    assert report["ok"] and sum(report["desired"].values()) == 6 and len(report["desired"]) >= 3
    assert all(p.startswith("gcp/us-central1/") and p.endswith("/spot") for p in report["desired"])
    assert cloud.ours() == _zones(report)
    vm = next(v for v in cloud.vms() if v["name"].startswith("sf-"))
    assert vm["scheduling"]["provisioningModel"] == "SPOT"
    script = next(i["value"] for i in vm["metadata"]["items"] if i["key"] == "startup-script")
    assert "gs://gcpfleet-checkpoints/gcpfleet" in script

    calls = control(cloud.url, "stats")
    rerun = cloud.fleet_json("up", str(cloud.spec), "--yes")
    assert rerun["ok"] and rerun["desired"] == report["desired"]
    after = control(cloud.url, "stats")
    assert after.get("instances.bulkInsert", 0) == calls.get("instances.bulkInsert", 0)
    assert after.get("instances.insert", 0) == calls.get("instances.insert", 0)
    assert cloud.ever_created() == 6

    status = cloud.fleet_json("status", "gcpfleet")
    assert "Traceback" not in json.dumps(status)
    down = cloud.fleet("down", "gcpfleet", "--yes")
    assert down.returncode == 0, down.stderr
    assert cloud.ours() == {}
    assert [v["name"] for v in cloud.vms()] == ["someone-elses"]


@pytest.mark.parametrize("point", [3, 4, 5, 6])
def test_killed_mid_up_a_rerun_converges_without_doubles(cloud, point):
    crashed = cloud.fleet("up", str(cloud.spec), "--yes", SPOTFLEET_TEST_CRASH_AT=str(point))
    assert crashed.returncode == 137, crashed.stderr
    report = cloud.fleet_json("up", str(cloud.spec), "--yes")
    assert report["ok"] and cloud.ours() == _zones(report)
    assert cloud.ever_created() == sum(report["desired"].values()) == 6


def test_zones_out_of_capacity_are_planned_around(cloud):
    cloud.spec.write_text(
        SPEC.replace("{min_pools: 3, max_pool_share: 0.34}", "{min_pools: 2, max_pool_share: 0.5, max_zone_share: 1.0}")
    )
    control(cloud.url, "capacity", {"zone": "us-central1-a", "count": 0})
    control(cloud.url, "capacity", {"zone": "us-central1-b", "count": 0})
    proc = cloud.fleet("up", str(cloud.spec), "--yes", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], proc.stdout
    failed = {f["pool"].split("/")[2] for f in report["failures"] if f["error_kind"] == "capacity"}
    assert failed and failed <= {"us-central1-a", "us-central1-b"}, "the first plan must have hit a full zone"
    assert all(f["error_code"] == "ZONE_RESOURCE_POOL_EXHAUSTED" for f in report["failures"])
    assert set(cloud.ours()) <= {"us-central1-c", "us-central1-f"}
    assert sum(cloud.ours().values()) == 6 == cloud.ever_created()


def test_without_a_project_up_fails_in_one_line(cloud):
    cloud.spec.write_text(SPEC.replace("{project: spec-project, ", "{"))
    proc = cloud.fleet("up", str(cloud.spec), "--yes")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "GOOGLE_CLOUD_PROJECT" in proc.stderr + proc.stdout
