"""The CLI's Vast world: ``fleet`` as a subprocess reaching the fake Vast server
(tests/fakes/vast_server.py) through ``SPOTFLEET_VAST_URL`` with the fake's key in ``VAST_API_KEY``;
eight one-GPU H100 asks, one rented by someone else. The server is the ``vast_server`` fixture
(tests/cli/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from cli.api_world import ApiWorld  # noqa: E402
from vast_server import API_KEY, VastServer  # noqa: E402

#: Eight one-GPU H100 machines and one someone else already rents.
ASKS = [
    {
        "id": 3000 + n,
        "machine_id": 800 + n,
        "num_gpus": 1,
        "gpu_name": "H100 SXM",
        "gpu_ram": 81559,
        "dph_base": 2.0 + 0.05 * n,
        "min_bid": 1.0 + 0.02 * n,
        "reliability2": 0.99,
        "geolocation": ["Texas, US", "Quebec, CA", "Oregon, US", "Bavaria, DE"][n % 4],
    }
    for n in range(8)
]

SPEC = """
name: vf
backend: cloud
capacity:
  gpus: 4
  accelerators: [H100]
  gpus_per_node: {min: 1, max: 1}
providers:
  vast: {min_reliability: 0.9}
diversification:
  max_pool_share: 0.5
node:
  spotfleet: preinstalled   # no checkpoint bucket here to ship spotfleet's wheel through
"""


class VastWorld(ApiWorld):
    fleet_name, size = "vf", 4
    crash_points = ("launch-recorded", "launch-sent:2", "instances-recorded:3")

    def __init__(self, root: Path, server: VastServer):
        super().__init__(
            root,
            server.url,
            spec=SPEC,
            name="vf",
            strip=("VAST_",),
            env_vars={"SPOTFLEET_VAST_URL": server.url, "VAST_API_KEY": API_KEY},
        )
        self.server = server
        self.control("reset", {"asks": ASKS})
        self.foreign = self.control("foreign", {"ask": 3007, "count": 1, "label": "someone-else"})["ids"]

    def instances(self) -> list[dict]:
        return self.control("instances")["instances"]

    def ours(self, *, live: bool = True) -> list[dict]:
        return [
            i
            for i in self.instances()
            if str(i["label"] or "").startswith("spotfleet|vf|") and (not live or not i["destroyed"])
        ]

    def foreign_alive(self) -> bool:
        return all(not i["destroyed"] for i in self.instances() if i["id"] in self.foreign)

    def check_up(self, report: dict, ours: list[dict]) -> None:
        assert all(i["is_bid"] for i in ours)
        assert {i["label"].split("|")[2] for i in ours} == set(report["desired"])  # one machine per pool

    def check_status(self, status: dict, planned: int) -> None:
        super().check_status(status, planned)
        assert status["stopped"] == []
