"""The CLI's OCI world: ``fleet`` as a subprocess reaching the fake OCI API
(tests/fakes/oci_server.py) through the real ``oci`` SDK, with a config file and throwaway API key
the fake writes; six preemptible A10s over the region's three availability domains, and one
instance that is not the fleet's. The server is the ``oci_server`` fixture (tests/cli/conftest.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cli.api_world import ApiWorld  # noqa: E402
from cli.lifecycle_world import desired_zones  # noqa: E402
from fakes.oci_server import ADS, COMPARTMENT, IMAGE, SUBNET, OciServer  # noqa: E402

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
LAUNCH = "POST /20160918/instances"


class OciWorld(ApiWorld):
    fleet_name, size = "ocifleet", 6
    crash_points = ("launch-sent:2",)  # after the second pool's launch was sent, before it was recorded
    timeout = 300

    def __init__(self, root: Path, server: OciServer):
        super().__init__(
            root, server.url, spec=SPEC, name="ocifleet", strip=("OCI_",), env_vars=server.write_config(root / "oci")
        )
        self.control("reset", {})
        self.control("config", {"boot_seconds": 0, "stop_seconds": 0})
        self.foreign = self.control("foreign", {"shape": "VM.GPU.A10.1", "ad": ADS[0], "count": 1})["ids"]
        self._launches = 0

    def instances(self) -> list[dict]:
        return self.control("instances")["instances"]

    def ours(self, *, live: bool = True) -> list[dict]:
        return [
            i
            for i in self.instances()
            if i["freeformTags"].get("spotfleet_fleet") == "ocifleet"
            and (not live or i["lifecycleState"] not in ("TERMINATING", "TERMINATED"))
        ]

    def zones(self) -> dict[str, int]:
        """Live instances of the fleet per availability domain, as the fake sees them."""
        out: dict[str, int] = {}
        for inst in self.ours():
            out[inst["availabilityDomain"]] = out.get(inst["availabilityDomain"], 0) + 1
        return out

    def foreign_alive(self) -> bool:
        live = [i["id"] for i in self.instances() if i["lifecycleState"] in ("RUNNING", "PROVISIONING")]
        return all(f in live for f in self.foreign)

    def before_up(self) -> None:
        self.control("config", {"boot_seconds": 3600, "stop_seconds": 3600})  # PROVISIONING, then TERMINATING

    def check_up(self, report: dict, ours: list[dict]) -> None:
        assert len(report["desired"]) == 3
        assert all(p.startswith("oci/us-ashburn-1/") and p.endswith("/VM.GPU.A10.1/spot") for p in report["desired"])
        assert self.zones() == desired_zones(report) == {ad: 2 for ad in ADS}
        body = ours[0]["launch_body"]
        assert body["preemptibleInstanceConfig"]["preemptionAction"] == {
            "type": "TERMINATE",
            "preserveBootVolume": False,
        }
        self._launches = self.control("calls")["calls"].get(LAUNCH, 0)

    def check_rerun(self, report: dict, first: dict | None = None) -> None:
        assert self.zones() == desired_zones(report)
        if first is not None:
            assert report["desired"] == first["desired"]
            assert self.control("calls")["calls"].get(LAUNCH, 0) == self._launches

    def check_status(self, status: dict, planned: int) -> None:
        assert "Traceback" not in json.dumps(status)
        assert {i["lifecycleState"] for i in self.instances() if i["id"] not in self.foreign} == {"PROVISIONING"}

    def check_down(self, down, ours, outputs) -> None:
        live = [i["id"] for i in self.instances() if i["lifecycleState"] in ("RUNNING", "PROVISIONING")]
        assert live == self.foreign
