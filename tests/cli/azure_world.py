"""The CLI's Azure world: ``fleet`` as a subprocess reaching the fake ARM server
(tests/fakes/azure_arm.py) through ``SPOTFLEET_AZURE_ARM_ENDPOINT``, operation polling at 0 s,
with the real azure-mgmt clients. The server is the ``arm_server`` fixture (tests/cli/conftest.py).
It is also a ``LifecycleWorld``: the shared lifecycle suite runs in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from azure_arm import SUBSCRIPTION, ArmServer  # noqa: E402
from cli.lifecycle_world import LifecycleWorld  # noqa: E402
from support.fake_control import control  # noqa: E402

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))
RG = "fleetrg"

SPEC = f"""
name: af
backend: cloud
capacity:
  gpus: 4
  accelerators: [A100-80GB]
  gpus_per_node: {{min: 1, max: 1}}
providers:
  azure: {{subscription_id: "{SUBSCRIPTION}", resource_group: {RG}}}
diversification:
  max_pool_share: 0.5
node:
  spotfleet: preinstalled   # no checkpoint bucket here to ship spotfleet's wheel through
"""


#: The same fleet in scale-set mode.
SCALE_SET_SPEC = f"""
name: af
backend: cloud
capacity:
  gpus: 6
  accelerators: [A100-80GB]
  gpus_per_node: {{min: 1, max: 1}}
  on_demand_gpus: 1
providers:
  azure: {{subscription_id: "{SUBSCRIPTION}", resource_group: {RG}, launch_mode: scale-set}}
diversification:
  max_pool_share: 0.9
node:
  spotfleet: preinstalled   # no checkpoint bucket here to ship spotfleet's wheel through
"""


class AzureWorld(LifecycleWorld):
    fleet_name = "af"
    crash_points = ("launch-sent:2", "instances-recorded:2")

    def __init__(self, root: Path, server: ArmServer):
        self.root, self.server = root, server
        self.home = root / "home"
        self.spec = root / "af.yaml"
        self.spec.write_text(SPEC)
        self._names: set[str] = set()
        self.control("reset", {})
        self.foreign = self.control(
            "foreign", {"resource_group": RG, "location": "eastus", "count": 1, "size": "Standard_NC24ads_A100_v4"}
        )["names"]

    def control(self, path: str, body: dict | None = None) -> dict:
        return control(self.server, path, body)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPOTFLEET_", "AZURE_"))}
        env.update(
            {
                "SPOTFLEET_HOME": str(self.home),
                "HOME": str(self.root),
                "COLUMNS": "200",
                "NO_COLOR": "1",
                "SPOTFLEET_AZURE_ARM_ENDPOINT": self.server.url,
                "SPOTFLEET_AZURE_POLLING_INTERVAL": "0",
                "SPOTFLEET_AZURE_PRICES_URL": f"{self.server.url}/api/retail/prices",
                **extra,
            }
        )
        return env

    def fleet(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [FLEET_BIN, *args],
            env=self.env(**extra),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=180,
        )

    def fleet_json(self, *args: str, ok: tuple[int, ...] = (0,)) -> Any:
        proc = self.fleet(*args, "--json")
        assert proc.returncode in ok, f"fleet {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return json.loads(proc.stdout)

    def state(self) -> dict:
        return self.control("state")

    def ours(self, *, live: bool = True) -> list[dict]:
        """The fleet's VMs (ARM deletes a VM outright: those alive are all there are)."""
        return [v for v in self.state()["vms"] if (v.get("tags") or {}).get("spotfleet:fleet") == "af"]

    def foreign_alive(self) -> bool:
        return set(self.foreign) <= {v["name"] for v in self.state()["vms"]}

    def ids(self, items: list[dict]) -> list[str]:
        return sorted(v["name"] for v in items)

    def check_planned(self, planned: int) -> None:
        assert planned >= 4  # gpus count H100-equivalents: an A100 weighs 0.6

    def check_up(self, report: dict, ours: list[dict]) -> None:
        assert all(v["properties"]["provisioningState"] == "Succeeded" for v in ours)
        assert {v["tags"]["spotfleet:pool"] for v in ours} == set(report["desired"])
        for vm in ours:
            props = vm["properties"]
            if vm["tags"]["spotfleet:pool"].endswith("/spot"):
                assert props["priority"] == "Spot" and props["evictionPolicy"] == "Delete"
                assert props["billingProfile"]["maxPrice"] == -1
            assert props["osProfile"]["customData"]  # the node bootstrap
        state = self.state()
        assert len(state["nics"]) == len(ours) and len(state["vnets"]) >= 1
        assert all(n["tags"]["spotfleet:fleet"] == "af" for n in state["nics"] + state["vnets"] + state["nsgs"])
        self._names = {v["name"] for v in ours}

    def check_rerun(self, report: dict, first: dict | None = None) -> None:
        ours = self.ours()
        if first is not None:
            assert {v["name"] for v in ours} == self._names  # nothing created twice
        else:
            assert sorted(n["name"] for n in self.state()["nics"]) == sorted(f"{v['name']}-nic" for v in ours)

    def check_down(self, down, ours, outputs) -> None:
        state = self.state()
        assert state["nics"] == [] and state["vnets"] == [] and state["nsgs"] == []  # the fleet's network went too
