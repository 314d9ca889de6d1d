"""The CLI's Lambda world: ``fleet`` as a subprocess reaching the fake Lambda server
(tests/fakes/lambda_server.py) through ``SPOTFLEET_LAMBDA_URL`` with the fake's key in
``LAMBDA_API_KEY``; A10s in three regions, an H100 nowhere with capacity, and one instance named
like the fleet's but not tagged as it. The server is the ``lambda_server`` fixture
(tests/cli/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from cli.api_world import ApiWorld  # noqa: E402
from lambda_server import API_KEY, LambdaServer  # noqa: E402

from providers.lambda_cloud.api import LambdaApi  # noqa: E402

SPEC = """
name: lf
backend: cloud
capacity:
  gpus: 6
  accelerators: [A10, H100]
  gpus_per_node: {min: 1, max: 1}
providers:
  lambda: {}
node:
  spotfleet: preinstalled   # no checkpoint bucket here to ship spotfleet's wheel through
"""

#: A10s in three regions (capacity 2, 2, 8), an H100 nowhere with capacity.
CAPACITY = {
    "gpu_1x_a10/us-east-1": 2,
    "gpu_1x_a10/us-west-1": 2,
    "gpu_1x_a10/europe-central-1": 8,
    "gpu_1x_h100_pcie/us-west-3": 0,
}


class LambdaWorld(ApiWorld):
    fleet_name, size = "lf", 6
    # the plan fills the roomiest region alone (its on-demand pool dominates the others, which the
    # planner prunes), so there is one launch: killed once it is recorded, and once it is sent
    crash_points = ("launch-recorded", "launch-sent")

    def __init__(self, root: Path, server: LambdaServer):
        super().__init__(
            root,
            server.url,
            spec=SPEC,
            name="lf",
            strip=("LAMBDA_",),
            env_vars={"SPOTFLEET_LAMBDA_URL": server.url, "LAMBDA_API_KEY": API_KEY},
        )
        self.control("reset", {"capacity": CAPACITY})
        self.control("config", {"boot_seconds": 0, "terminate_seconds": 0, "launch_interval": 0, "quota": 50})
        self.foreign = self.control("foreign", {"name": "spotfleet-lf-0000000000", "count": 1})["ids"]

    def instances(self) -> list[dict]:
        return self.control("instances")["instances"]

    def ours(self, *, live: bool = True) -> list[dict]:
        return [
            i
            for i in self.instances()
            if {"key": "spotfleet:fleet", "value": "lf"} in i["tags"]
            and (not live or i["status"] not in ("terminated", "terminating"))
        ]

    def foreign_alive(self) -> bool:
        return all(i["status"] == "active" for i in self.instances() if i["id"] in self.foreign)

    def check_up(self, report: dict, ours: list[dict]) -> None:
        assert all("/gpu_1x_a10/" in pool for pool in report["desired"])  # no H100 capacity now
        assert all(i["launch_body"]["user_data"].startswith("#!/bin/bash") for i in ours)

    def check_down(self, down, ours, outputs) -> None:
        assert LambdaApi(self.url, API_KEY).ssh_keys() == []  # the fleet's key went too
