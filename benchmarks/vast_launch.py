"""Search-to-running for 20 interruptible Vast machines, and API calls per instance.

The installed ``fleet up`` runs as a subprocess against the fake Vast server
(tests/fakes/vast_server.py) with a fixed added latency per API answer (``--latency``,
0.05 and 0.2 s by default). The fake offers 30 one-GPU H100 machines that take bids; the spec
asks for 20 interruptible nodes. Measured: seconds from the start of ``fleet up`` (search,
plan, launch) until the adapter lists all 20 as running, and the API calls the fake saw, per
route and per instance. Instances boot after ``--boot`` seconds on the fake (0: at once).

Run: ``python benchmarks/vast_launch.py``; prints the figures and saves
``benchmarks/results/vast_launch.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fakes"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from fake_launch import measure  # noqa: E402
from vast_server import API_KEY, VastServer  # noqa: E402

from fleet.model import InstanceState  # noqa: E402
from providers.vast.api import VastApi  # noqa: E402
from providers.vast.provider import VastProvider  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "vast_launch.json"
NODES = 20
MACHINES = 30

SPEC = f"""
name: vbench
backend: cloud
capacity:
  gpus: {NODES}
  accelerators: [H100]
  gpus_per_node: {{min: 1, max: 1}}
providers:
  vast: {{on_demand: false, min_reliability: 0.9}}
diversification:
  max_pool_share: 0.05
node:
  spotfleet: preinstalled   # no checkpoint bucket here to ship spotfleet's wheel through
"""


def asks() -> list[dict]:
    regions = ["Texas, US", "Quebec, CA", "Oregon, US", "Bavaria, DE", "Utah, US", "Ontario, CA"]
    return [
        {
            "id": 5000 + n,
            "machine_id": 900 + n,
            "num_gpus": 1,
            "gpu_name": "H100 SXM",
            "gpu_ram": 81559,
            "dph_base": 2.0 + 0.01 * n,
            "min_bid": 1.0 + 0.01 * n,
            "reliability2": 0.99,
            "geolocation": regions[n % len(regions)],
        }
        for n in range(MACHINES)
    ]


def run_once(server: VastServer, latency: float, boot: float) -> dict:
    httpx.post(f"{server.url}/_control/reset", json={"asks": asks()}).raise_for_status()
    httpx.post(f"{server.url}/_control/config", json={"latency": latency, "boot_seconds": boot}).raise_for_status()
    watcher = VastProvider(api=VastApi(server.url, API_KEY))
    got = measure(
        server.url,
        SPEC,
        "vbench",
        NODES,
        {"SPOTFLEET_VAST_URL": server.url, "VAST_API_KEY": API_KEY},
        ("VAST_",),
        lambda: sum(i.state is InstanceState.RUNNING for i in watcher.list_instances("vbench")),
    )
    return {"latency_s": latency, "boot_s": boot, "search_to_running_seconds": got.pop("to_running_seconds"), **got}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, nargs="+", default=[0.05, 0.2])
    parser.add_argument("--boot", type=float, default=0.0)
    args = parser.parse_args()
    server = VastServer(port=0).start()
    try:
        runs = [run_once(server, latency, args.boot) for latency in args.latency]
    finally:
        server.stop()
    for r in runs:
        print(
            f"latency {r['latency_s']:.2f}s: {r['launched']} launched; fleet up {r['up_seconds']:.2f}s, "
            f"search-to-running {r['search_to_running_seconds']:.2f}s; {r['api_calls_during_up']} API calls "
            f"({r['api_calls_per_instance']:.2f} per instance): {r['calls_by_route']}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "vast_launch",
                "nodes": NODES,
                "machines_offered": MACHINES,
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "runs": runs,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
