"""``fleet up`` of 20 Lambda nodes, and API calls per instance, against the fake Lambda API.

The installed ``fleet up`` runs as a subprocess against the fake Lambda server
(tests/fakes/lambda_server.py) with a fixed added latency per API answer (``--latency``, 0.05 s
by default). The spec asks for 20 one-GPU A10 nodes. Two markets: ``roomy`` (one region can
take all 20) and ``tight`` (six regions can take 4 each, and the API says only *that* a region
has capacity, not how much: launches are all or none, so the adapter halves after a refusal
and the executor re-plans what is still missing). Measured: seconds until ``fleet up`` returns
with 20 running, API calls per route and per instance, and the launch calls, which on the real
API are limited to one per 12 seconds (the fake enforces no limit here): ``real_launch_floor_s``
is that floor. The ratio compares the launch calls with one launch per instance (the way
dstack's Lambda backend launches), the best alternative measured in the same run.

Run: ``python benchmarks/lambda_launch.py``; prints the figures and saves
``benchmarks/results/lambda_launch.json``.
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
from lambda_server import API_KEY, LambdaServer  # noqa: E402

from providers.lambda_cloud.api import LAUNCH_INTERVAL  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "lambda_launch.json"
FLEET_BIN = str(Path(sys.executable).with_name("fleet"))
NODES = 20
LAUNCH = "POST /api/v1/instance-operations/launch"

SPEC = f"""
name: lbench
backend: cloud
capacity:
  gpus: {NODES}
  accelerators: [A10]
  gpus_per_node: {{min: 1, max: 1}}
providers:
  lambda: {{}}
node:
  spotfleet: preinstalled
"""

MARKETS = {
    "roomy": {"gpu_1x_a10/us-east-1": 30},
    "tight": {
        f"gpu_1x_a10/{r}": 4
        for r in ("us-east-1", "us-west-1", "us-west-2", "us-south-1", "us-midwest-1", "europe-central-1")
    },
}


def run_once(server: LambdaServer, market: str, latency: float) -> dict:
    httpx.post(f"{server.url}/_control/reset", json={"capacity": MARKETS[market]}).raise_for_status()
    httpx.post(
        f"{server.url}/_control/config",
        json={"latency": latency, "boot_seconds": 0, "launch_interval": 0, "quota": 100},
    ).raise_for_status()
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "lbench.yaml"
        spec.write_text(SPEC)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPOTFLEET_", "LAMBDA_"))}
        env.update(
            SPOTFLEET_HOME=str(Path(tmp) / "home"), HOME=tmp, SPOTFLEET_LAMBDA_URL=server.url, LAMBDA_API_KEY=API_KEY
        )
        rounds, start = 0, time.perf_counter()
        while True:  # a tight market leaves some missing after one `fleet up`; a user runs it again
            rounds += 1
            proc = subprocess.run(
                [FLEET_BIN, "up", str(spec), "--yes", "--json"], env=env, capture_output=True, text=True, timeout=600
            )
            report = json.loads(proc.stdout or "{}")
            if proc.returncode == 0 or rounds == 3:
                break
        up_done = time.perf_counter()
        if proc.returncode != 0:
            raise SystemExit(f"fleet up failed ({proc.returncode}): {proc.stderr[-2000:]}")
        calls = httpx.get(f"{server.url}/_control/calls").json()
        subprocess.run([FLEET_BIN, "down", "lbench", "--yes", "--json"], env=env, capture_output=True, timeout=600)
    launches = calls["calls"].get(LAUNCH, 0)
    return {
        "market": market,
        "latency_s": latency,
        "fleet_up_runs": rounds,
        "running": sum(report["counts"].values()),
        "pools": len(report["counts"]),
        "up_seconds": round(up_done - start, 3),
        "api_calls_during_up": calls["total"],
        "api_calls_per_instance": round(calls["total"] / NODES, 2),
        "launch_calls": launches,
        "launch_calls_per_instance": round(launches / NODES, 2),
        "real_launch_floor_s": round(max(0, launches - 1) * LAUNCH_INTERVAL, 1),
        "launch_calls_vs_one_per_instance": round(launches / NODES, 3),
        "calls_by_route": calls["calls"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    server = LambdaServer(port=0).start()
    try:
        runs = [run_once(server, market, args.latency) for market in MARKETS]
    finally:
        server.stop()
    for r in runs:
        print(
            f"{r['market']}: {r['running']} running in {r['pools']} pools after {r['fleet_up_runs']} `fleet up` "
            f"({r['up_seconds']:.2f}s); {r['api_calls_during_up']} API calls ({r['api_calls_per_instance']:.2f} per "
            f"instance), {r['launch_calls']} launch calls ({r['launch_calls_vs_one_per_instance']:.2f}x one per "
            f"instance; >= {r['real_launch_floor_s']:.0f}s at Lambda's launch limit): {r['calls_by_route']}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "lambda_launch",
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
