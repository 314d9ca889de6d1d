"""Individual Spot VMs on Azure through ``fleet up``: wall time and ARM calls per instance.

The installed ``fleet up`` runs as a subprocess against the fake ARM server
(tests/fakes/azure_arm.py) with a fixed added latency per ARM answer (``--latency``, 0.05 s by
default) and operation polling at 0 s. The fake offers one A100 size in four pools (eastus zones
1-3, westus2) with room for all; the spec asks for ``--gpus`` of one-GPU Spot nodes (40 by
default; capacity counts H100 equivalents, an A100 counts 0.6, so 40 asks for 67 VMs).
Measured: seconds of ``fleet up`` (planning and launch included) and of ``fleet down``, and the ARM
calls the fake saw during ``up``, per route and per instance. (The Flexible scale set with
``priorityMixPolicy`` is not built yet, so there is no scale-set column to compare.)

Run: ``python benchmarks/azure_launch.py``; prints the figures and saves
``benchmarks/results/azure_launch.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fakes"))
from azure_arm import SUBSCRIPTION, ArmServer  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "azure_launch.json"
FLEET_BIN = str(Path(sys.executable).with_name("fleet"))
SIZE = "Standard_NC24ads_A100_v4"

SPEC = """
name: abench
backend: cloud
capacity:
  gpus: {gpus}
  accelerators: [A100-80GB]
  gpus_per_node: {{min: 1, max: 1}}
providers:
  azure: {{subscription_id: "{sub}", resource_group: bench, on_demand: false}}
diversification:
  max_pool_share: 0.4
"""


def run_once(server: ArmServer, gpus: int, latency: float) -> dict:
    capacity = {f"{loc}/{SIZE}/Spot": 10 * gpus for loc in ("eastus", "westus2")}
    httpx.post(f"{server.url}/_control/reset", json={"latency": latency, "capacity": capacity}).raise_for_status()
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "abench.yaml"
        spec.write_text(SPEC.format(gpus=gpus, sub=SUBSCRIPTION))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPOTFLEET_", "AZURE_"))}
        env.update(
            SPOTFLEET_HOME=str(Path(tmp) / "home"),
            HOME=tmp,
            SPOTFLEET_AZURE_ARM_ENDPOINT=server.url,
            SPOTFLEET_AZURE_POLLING_INTERVAL="0",
            SPOTFLEET_AZURE_PRICES_URL=f"{server.url}/api/retail/prices",
        )
        start = time.perf_counter()
        proc = subprocess.run(
            [FLEET_BIN, "up", str(spec), "--yes", "--json"], env=env, capture_output=True, text=True, timeout=1200
        )
        up_seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"fleet up failed ({proc.returncode}): {proc.stderr[-2000:]}")
        calls = httpx.get(f"{server.url}/_control/calls").json()["calls"]
        vms = len(httpx.get(f"{server.url}/_control/state").json()["vms"])
        start = time.perf_counter()
        subprocess.run([FLEET_BIN, "down", "abench", "--yes", "--json"], env=env, capture_output=True, timeout=1200)
        down_seconds = time.perf_counter() - start
    total = sum(calls.values())
    return {
        "latency_s": latency,
        "gpus": gpus,
        "vms_created": vms,
        "up_seconds": round(up_seconds, 3),
        "down_seconds": round(down_seconds, 3),
        "arm_calls_during_up": total,
        "arm_calls_per_instance": round(total / max(vms, 1), 2),
        "calls_by_route": calls,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=40)
    parser.add_argument("--latency", type=float, nargs="+", default=[0.05])
    args = parser.parse_args()
    server = ArmServer(port=0).start()
    try:
        runs = [run_once(server, args.gpus, latency) for latency in args.latency]
    finally:
        server.stop()
    for r in runs:
        print(
            f"latency {r['latency_s']:.2f}s: {r['vms_created']} Spot VMs; fleet up {r['up_seconds']:.2f}s, "
            f"fleet down {r['down_seconds']:.2f}s; {r['arm_calls_during_up']} ARM calls "
            f"({r['arm_calls_per_instance']:.2f} per instance): {r['calls_by_route']}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "azure_launch",
                "mode": "individual Spot VMs",
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
