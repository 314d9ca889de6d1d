"""The CLI's GCP world: ``fleet`` as a subprocess reaching the fake Compute Engine server
(tests/fakes/gce_server.py) through ``SPOTFLEET_GCE_ENDPOINT`` and fake-gcs-server through
``STORAGE_EMULATOR_HOST``; six spot T4s over at least three zones of us-central1. The servers
are the ``gce`` and ``gcs`` fixtures (tests/cli/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cli.lifecycle_world import FLEET_BIN, LifecycleWorld, desired_zones  # noqa: E402
from fakes.gce_server import GceServer, control  # noqa: E402

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
INSERTS = ("instances.bulkInsert", "instances.insert")


class GcpWorld(LifecycleWorld):
    fleet_name, size = "gcpfleet", 6
    crash_points = ("3", "4", "5", "6")

    def __init__(self, root: Path, gce: GceServer, gcs: Any):
        self.root, self.url = root, gce.url
        self.home = root / "home"
        self.spec = root / "gcpfleet.yaml"
        self.spec.write_text(SPEC)
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GOOGLE_", "CLOUDSDK_", "SPOTFLEET_")) and k != "STORAGE_EMULATOR_HOST"
        }
        self.env.update(
            SPOTFLEET_HOME=str(self.home),
            SPOTFLEET_GCE_ENDPOINT=gce.url,
            COLUMNS="200",
            NO_COLOR="1",
            STORAGE_EMULATOR_HOST=gcs.env["STORAGE_EMULATOR_HOST"],
        )
        control(gce.url, "reset", {})
        self.foreign: list[str] = []
        self._calls: dict[str, int] = {}

    def fleet(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [FLEET_BIN, *args],
            env={**self.env, **extra},
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )

    def fleet_json(self, *args: str, ok: tuple[int, ...] = (0,)) -> Any:
        proc = self.fleet(*args, "--json")
        assert proc.returncode in ok, f"{args} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return json.loads(proc.stdout)

    def vms(self) -> list[dict]:
        return control(self.url, "instances")["instances"]

    def ours(self, *, live: bool = True) -> list[dict]:
        state = control(self.url, "instances")
        vms = state["instances"] if live else state["instances"] + state["ended"]
        return [
            vm
            for vm in vms
            if vm.get("labels", {}).get("spotfleet-fleet") == "gcpfleet" and (not live or vm["status"] != "TERMINATED")
        ]

    def zones(self) -> dict[str, int]:
        """Live VMs of the fleet per zone, as the fake sees them."""
        out: dict[str, int] = {}
        for vm in self.ours():
            zone = vm["zone"].rsplit("/", 1)[-1]
            out[zone] = out.get(zone, 0) + 1
        return out

    def ids(self, items: list[dict]) -> list[str]:
        """``zone/name``, as the adapter names a VM."""
        return sorted(f"{vm['zone'].rsplit('/', 1)[-1]}/{vm['name']}" for vm in items)

    def foreign_alive(self) -> bool:
        return set(self.foreign) <= {v["name"] for v in self.vms()}

    def before_up(self) -> None:
        control(self.url, "foreign", {"zone": "us-central1-a", "name": "someone-elses", "machineType": "n1-standard-4"})
        self.foreign = ["someone-elses"]

    def check_up(self, report: dict, ours: list[dict]) -> None:
        assert len(report["desired"]) >= 3
        assert all(p.startswith("gcp/us-central1/") and p.endswith("/spot") for p in report["desired"])
        assert self.zones() == desired_zones(report)
        vm = next(v for v in self.vms() if v["name"].startswith("sf-"))
        assert vm["scheduling"]["provisioningModel"] == "SPOT"
        script = next(i["value"] for i in vm["metadata"]["items"] if i["key"] == "startup-script")
        assert "gs://gcpfleet-checkpoints/gcpfleet" in script
        self._calls = control(self.url, "stats")

    def check_rerun(self, report: dict, first: dict | None = None) -> None:
        assert self.zones() == desired_zones(report)
        if first is not None:
            assert report["desired"] == first["desired"]
            after = control(self.url, "stats")
            assert all(after.get(call, 0) == self._calls.get(call, 0) for call in INSERTS)

    def check_status(self, status: dict, planned: int) -> None:
        assert "Traceback" not in json.dumps(status)

    def check_down(self, down, ours, outputs) -> None:
        assert [v["name"] for v in self.vms()] == self.foreign
