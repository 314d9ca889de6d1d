"""Plan-to-running for 20 preemptible OCI GPU VMs, and API calls per instance.

The installed ``fleet up`` runs as a subprocess against the fake OCI Core Services / Identity
API (tests/fakes/oci_server.py), driven by the real ``oci`` SDK (every request signed with a
throwaway API key), with a fixed added latency per API answer (``--latency``, 0.05 and 0.2 s by
default). The spec asks for 20 one-GPU A10 nodes on preemptible capacity; the fake's region has
three availability domains, so the plan spreads them over three pools (VM.GPU.A10.1 in each AD).
Measured: seconds from the start of ``fleet up`` until the adapter lists all 20 as running, and
the API calls the fake saw, per route and per instance. Instances boot after ``--boot`` seconds
on the fake (0: at once).

Run: ``python benchmarks/oci_launch.py``; prints the figures and saves
``benchmarks/results/oci_launch.json``.
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
from oci_server import COMPARTMENT, IMAGE, SUBNET, OciServer  # noqa: E402

from fleet.model import InstanceState  # noqa: E402
from providers.oci.api import OciApi, load_config  # noqa: E402
from providers.oci.provider import OciProvider  # noqa: E402
from providers.oci.settings import OciSettings  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "oci_launch.json"
FLEET_BIN = str(Path(sys.executable).with_name("fleet"))
NODES = 20

SPEC = f"""
name: ocibench
backend: cloud
capacity:
  gpus: {NODES}
  accelerators: [A10]
  gpus_per_node: {{min: 1, max: 1}}
providers:
  oci: {{on_demand: false, compartment_id: {COMPARTMENT}, subnet_id: {SUBNET}, image_id: {IMAGE}}}
diversification:
  max_pool_share: 0.4
  max_zone_share: 0.4
node:
  spotfleet: preinstalled   # no checkpoint bucket here to ship spotfleet's wheel through
"""


def run_once(server: OciServer, latency: float, boot: float) -> dict:
    httpx.post(f"{server.url}/_control/reset", json={}).raise_for_status()
    httpx.post(f"{server.url}/_control/config", json={"latency": latency, "boot_seconds": boot}).raise_for_status()
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "ocibench.yaml"
        spec.write_text(SPEC)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPOTFLEET_", "OCI_"))}
        env.update(SPOTFLEET_HOME=str(Path(tmp) / "home"), HOME=tmp, **server.write_config(Path(tmp) / "oci"))
        start = time.perf_counter()
        proc = subprocess.run(
            [FLEET_BIN, "up", str(spec), "--yes", "--json"], env=env, capture_output=True, text=True, timeout=600
        )
        up_done = time.perf_counter()
        if proc.returncode != 0:
            raise SystemExit(f"fleet up failed ({proc.returncode}): {proc.stdout[-1000:]} {proc.stderr[-2000:]}")
        calls_up = httpx.get(f"{server.url}/_control/calls").json()
        api = OciApi(load_config(env["SPOTFLEET_OCI_CONFIG"]), endpoint=server.url)
        watcher = OciProvider(OciSettings(compartment_id=COMPARTMENT, subnet_id=SUBNET, image_id=IMAGE), api)
        polls = 0
        while True:
            running = [i for i in watcher.list_instances("ocibench") if i.state is InstanceState.RUNNING]
            polls += 1
            if len(running) >= NODES:
                break
            time.sleep(0.1)
        all_running = time.perf_counter()
        report = json.loads(proc.stdout)
        subprocess.run([FLEET_BIN, "down", "ocibench", "--yes", "--json"], env=env, capture_output=True, timeout=600)
    launches = calls_up["calls"].get("POST /20160918/instances", 0)
    return {
        "latency_s": latency,
        "boot_s": boot,
        "launched": len(report["launched"]),
        "pools": len(report["desired"]),
        "up_seconds": round(up_done - start, 3),
        "plan_to_running_seconds": round(all_running - start, 3),
        "api_calls_during_up": calls_up["total"],
        "api_calls_per_instance": round(calls_up["total"] / NODES, 2),
        "launch_calls_per_instance": round(launches / NODES, 2),
        "calls_by_route": calls_up["calls"],
        "status_polls_until_running": polls,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, nargs="+", default=[0.05, 0.2])
    parser.add_argument("--boot", type=float, default=0.0)
    args = parser.parse_args()
    server = OciServer(port=0).start()
    try:
        runs = [run_once(server, latency, args.boot) for latency in args.latency]
    finally:
        server.stop()
    for r in runs:
        print(
            f"latency {r['latency_s']:.2f}s: {r['launched']} launched in {r['pools']} pools; fleet up "
            f"{r['up_seconds']:.2f}s, plan-to-running {r['plan_to_running_seconds']:.2f}s; "
            f"{r['api_calls_during_up']} API calls ({r['api_calls_per_instance']:.2f} per instance, "
            f"{r['launch_calls_per_instance']:.2f} launches): {r['calls_by_route']}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "oci_launch",
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
