"""`fleet up / status / down` on `backend: cloud` with only OCI enabled, as real subprocesses against
the fake OCI API (tests/fakes/oci_server.py) through the real ``oci`` SDK: the fleet meets its
spec over the region's availability domains, a rerun launches nothing, a kill -9 mid-up converges
on rerun without doubles, an AD out of host capacity is planned around, an instance that is not
the fleet's is never touched, and `fleet down` leaves nothing of the fleet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cli.world import FLEET_BIN  # noqa: E402
from fakes.oci_server import ADS, COMPARTMENT, IMAGE, SUBNET, OciServer  # noqa: E402

pytest.importorskip("oci")

SPEC = f"""
name: ocifleet
backend: cloud
capacity:
  gpus: 6
  accelerators: [A10]
  gpus_per_node: {{min: 1, max: 1}}
diversification: {{min_pools: 3, max_pool_share: 0.34, max_zone_share: 0.34}}
providers:
  oci: {{compartment_id: {COMPARTMENT}, subnet_id: {SUBNET}, image_id: {IMAGE}, on_demand: false}}
node: {{startup: "python train.py", spotfleet: preinstalled}}
"""


@pytest.fixture(scope="module")
def server():
    srv = OciServer().start()
    yield srv
    srv.stop()


class Cloud:
    def __init__(self, root: Path, server: OciServer):
        self.root, self.url = root, server.url
        self.spec = root / "ocifleet.yaml"
        self.spec.write_text(SPEC)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SPOTFLEET_", "OCI_"))}
        self.env.update(
            SPOTFLEET_HOME=str(root / "home"), COLUMNS="200", NO_COLOR="1", **server.write_config(root / "oci")
        )

    def control(self, path: str, body: dict | None = None) -> dict:
        resp = (
            httpx.post(f"{self.url}/_control/{path}", json=body)
            if body is not None
            else httpx.get(f"{self.url}/_control/{path}")
        )
        resp.raise_for_status()
        return resp.json()

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

    def instances(self) -> list[dict]:
        return self.control("instances")["instances"]

    def ours(self) -> dict[str, int]:
        """Live instances of the fleet per availability domain, as the fake sees them."""
        out: dict[str, int] = {}
        for inst in self.instances():
            if inst["freeformTags"].get("spotfleet_fleet") == "ocifleet" and inst["lifecycleState"] not in (
                "TERMINATING",
                "TERMINATED",
            ):
                out[inst["availabilityDomain"]] = out.get(inst["availabilityDomain"], 0) + 1
        return out

    def ever_created(self) -> int:
        return sum(1 for i in self.instances() if i["freeformTags"].get("spotfleet_fleet") == "ocifleet")


@pytest.fixture
def cloud(tmp_path, server) -> Cloud:
    httpx.post(f"{server.url}/_control/reset", json={}).raise_for_status()
    httpx.post(f"{server.url}/_control/config", json={"boot_seconds": 0, "stop_seconds": 0}).raise_for_status()
    return Cloud(tmp_path, server)


def _zones(report: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for pool, n in report["desired"].items():
        zone = pool.split("/")[2]
        out[zone] = out.get(zone, 0) + n
    return out


def test_up_meets_the_spec_a_rerun_changes_nothing_and_down_spares_a_foreign_instance(cloud):
    foreign = cloud.control("foreign", {"shape": "VM.GPU.A10.1", "ad": ADS[0], "count": 1})["ids"]
    cloud.control("config", {"boot_seconds": 3600, "stop_seconds": 3600})  # PROVISIONING, then TERMINATING, as on OCI
    report = cloud.fleet_json("up", str(cloud.spec), "--yes")
    assert report["ok"] and sum(report["desired"].values()) == 6 and len(report["desired"]) == 3
    assert all(p.startswith("oci/us-ashburn-1/") and p.endswith("/VM.GPU.A10.1/spot") for p in report["desired"])
    assert cloud.ours() == _zones(report) == {ad: 2 for ad in ADS}
    body = next(i["launch_body"] for i in cloud.instances() if i["id"] not in foreign)
    assert body["preemptibleInstanceConfig"]["preemptionAction"] == {"type": "TERMINATE", "preserveBootVolume": False}

    launches = cloud.control("calls")["calls"].get("POST /20160918/instances", 0)
    rerun = cloud.fleet_json("up", str(cloud.spec), "--yes")
    assert rerun["ok"] and rerun["desired"] == report["desired"]
    assert cloud.control("calls")["calls"].get("POST /20160918/instances", 0) == launches
    assert cloud.ever_created() == 6

    status = cloud.fleet_json("status", "ocifleet")
    assert "Traceback" not in json.dumps(status)
    assert {i["lifecycleState"] for i in cloud.instances() if i["id"] not in foreign} == {"PROVISIONING"}
    down = cloud.fleet("down", "ocifleet", "--yes")
    assert down.returncode == 0, down.stderr
    assert cloud.ours() == {}
    live = [i["id"] for i in cloud.instances() if i["lifecycleState"] in ("RUNNING", "PROVISIONING")]
    assert live == foreign


def test_killed_mid_up_a_rerun_converges_without_doubles(cloud):
    # killed after the second pool's launch was sent, before its instances were recorded
    crashed = cloud.fleet("up", str(cloud.spec), "--yes", SPOTFLEET_TEST_CRASH_AT="launch-sent:2")
    assert crashed.returncode == 137, crashed.stderr
    report = cloud.fleet_json("up", str(cloud.spec), "--yes")
    assert report["ok"] and cloud.ours() == _zones(report)
    assert cloud.ever_created() == sum(report["desired"].values()) == 6
    assert cloud.fleet("down", "ocifleet", "--yes").returncode == 0 and cloud.ours() == {}


def test_an_ad_out_of_host_capacity_is_planned_around(cloud):
    cloud.spec.write_text(
        SPEC.replace(
            "{min_pools: 3, max_pool_share: 0.34, max_zone_share: 0.34}",
            "{min_pools: 2, max_pool_share: 0.5, max_zone_share: 1.0}",
        )
    )
    cloud.control("capacity", {"ad": ADS[0], "shape": "VM.GPU.A10.1", "hosts": 0})
    proc = cloud.fleet("up", str(cloud.spec), "--yes", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], proc.stdout + proc.stderr
    assert set(cloud.ours()) <= {ADS[1], ADS[2]} and sum(cloud.ours().values()) == 6 == cloud.ever_created()
    assert all(f["error_code"] == "OutOfHostCapacity" for f in report["failures"])
