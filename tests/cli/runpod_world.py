"""The CLI's RunPod world: ``fleet`` as a subprocess reaching the fake RunPod REST API v2
(tests/fakes/runpod_server.py) through ``SPOTFLEET_RUNPOD_URL`` with the fake's key in
``RUNPOD_API_KEY``; four on-demand H100 pods on the secure cloud, and one pod named like the
fleet's but not labelled as it. The server is the ``runpod_server`` fixture (tests/cli/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from cli.api_world import ApiWorld  # noqa: E402
from runpod_server import API_KEY, RunPodServer  # noqa: E402

SPEC = """
name: rf
backend: cloud
capacity:
  gpus: 4
  accelerators: [H100]
  gpus_per_node: {min: 1, max: 1}
providers:
  runpod: {clouds: [SECURE]}
diversification:
  max_pool_share: 0.5
node:
  spotfleet: preinstalled   # no checkpoint bucket here to ship spotfleet's wheel through
"""


class RunPodWorld(ApiWorld):
    fleet_name, size = "rf", 4
    # one pool holds the whole plan (see LambdaWorld), so killed once its one launch is sent
    crash_points = ("launch-sent",)

    def __init__(self, root: Path, server: RunPodServer):
        super().__init__(
            root,
            server.url,
            spec=SPEC,
            name="spec",
            env_vars={"SPOTFLEET_RUNPOD_URL": server.url, "RUNPOD_API_KEY": API_KEY},
            strip=("RUNPOD_",),
        )
        self.control("reset", {})
        self.foreign = self.control("foreign", {"count": 1, "name": "spotfleet-rf"})["ids"]  # ours by name only
        self._status_text: subprocess.CompletedProcess[str] | None = None

    def ours(self, *, live: bool = True) -> list[dict]:
        return [
            p
            for p in self.control("pods")["pods"]
            if p["env"].get("SPOTFLEET_LABEL", "").startswith("spotfleet|rf|") and (not live or not p["terminated"])
        ]

    def foreign_alive(self) -> bool:
        return all(not p["terminated"] for p in self.control("pods")["pods"] if p["id"] in self.foreign)

    def check_up(self, report: dict, ours: list[dict]) -> None:
        assert all(p["cloud"] == "SECURE" for p in ours)
        assert all(pool.endswith("/on-demand") for pool in report["desired"])  # RunPod sells no spot pods

    def check_status(self, status: dict, planned: int) -> None:
        super().check_status(status, planned)
        self._status_text = self.fleet("status", "rf")

    def check_down(self, down, ours, outputs) -> None:
        assert self._status_text is not None
        for proc in (*outputs, self._status_text):  # the key is in no output and not in the state store
            assert API_KEY not in proc.stdout and API_KEY not in proc.stderr
        for path in self.home.rglob("*"):
            if path.is_file():
                assert API_KEY.encode() not in path.read_bytes(), path
