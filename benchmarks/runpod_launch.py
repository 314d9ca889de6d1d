"""Catalog-to-running for 20 on-demand RunPod pods, and API calls per instance.

The installed ``fleet up`` runs as a subprocess against the fake RunPod REST API v2
(tests/fakes/runpod_server.py) with a fixed added latency per API answer (``--latency``, 0.05
and 0.2 s by default). The fake's catalog offers H100 SXM and PCIe pods in five data centers on
the Secure and Community clouds; the spec asks for 20 one-GPU nodes, at most two per pool.
Measured: seconds from the start of ``fleet up`` (catalog, plan, launch) until the adapter lists
all 20 pods as running, and the API calls the fake saw, per route and per instance. Pods go
PROVISIONING -> STARTING -> RUNNING after ``--boot`` seconds on the fake (0: at once).

Run: ``python benchmarks/runpod_launch.py``; prints the figures and saves
``benchmarks/results/runpod_launch.json``.
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
from runpod_server import API_KEY, RunPodServer  # noqa: E402

from fleet.model import InstanceState  # noqa: E402
from providers.runpod.api import client  # noqa: E402
from providers.runpod.provider import RunPodProvider  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "runpod_launch.json"
NODES = 20

SPEC = f"""
name: rbench
backend: cloud
capacity:
  gpus: {NODES}
  accelerators: [H100]
  gpus_per_node: {{min: 1, max: 1}}
providers:
  runpod: {{spot: false}}
diversification:
  max_pool_share: 0.1
node:
  spotfleet: preinstalled   # no checkpoint bucket here to ship spotfleet's wheel through
"""


def run_once(server: RunPodServer, latency: float, boot: float) -> dict:
    httpx.post(f"{server.url}/_control/reset", json={}).raise_for_status()
    httpx.post(f"{server.url}/_control/config", json={"latency": latency, "boot_seconds": boot}).raise_for_status()
    watcher = RunPodProvider(api=client(server.url, API_KEY))
    got = measure(
        server.url,
        SPEC,
        "rbench",
        NODES,
        {"SPOTFLEET_RUNPOD_URL": server.url, "RUNPOD_API_KEY": API_KEY},
        ("RUNPOD_",),
        lambda: sum(i.state is InstanceState.RUNNING for i in watcher.list_instances("rbench")),
    )
    return {"latency_s": latency, "boot_s": boot, **got}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, nargs="+", default=[0.05, 0.2])
    parser.add_argument("--boot", type=float, default=0.0)
    args = parser.parse_args()
    server = RunPodServer(port=0).start()
    try:
        runs = [run_once(server, latency, args.boot) for latency in args.latency]
    finally:
        server.stop()
    for r in runs:
        print(
            f"latency {r['latency_s']:.2f}s: {r['launched']} launched; fleet up {r['up_seconds']:.2f}s, "
            f"catalog-to-running {r['to_running_seconds']:.2f}s; {r['api_calls_during_up']} API calls "
            f"({r['api_calls_per_instance']:.2f} per instance): {r['calls_by_route']}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "runpod_launch",
                "nodes": NODES,
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
