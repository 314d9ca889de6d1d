"""`fleet up` of 100 instances over 12 pools in 3 regions on AWS, against moto with a fixed added
latency: wall time with pools launched in parallel against one pool at a time, and the AWS API
calls made per launched instance.

The real ``fleet`` command runs as a subprocess with ``backend: cloud``; boto3 talks HTTP to the
EC2 proxy of ``tests/fakes`` in front of an in-process moto server. The proxy adds ``--latency``
seconds to every request (0.1 s by default: a nearby AWS region) and counts requests per action;
it also sets spot prices so that exactly 12 pools (2 zones x 2 single-T4 types in each of
us-east-1, us-west-2 and eu-west-1) are the cheapest, and ``max_pool_share`` makes the planner
use all 12. Each run starts from an empty moto.

Run: ``python benchmarks/aws_launch.py`` (about a minute). Prints the figures and saves
``benchmarks/results/aws_launch.json``.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fakes"))

import aws_world  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "aws_launch.json"
FLEET_BIN = str(Path(sys.executable).with_name("fleet"))
REGIONS = {
    "us-east-1": ("us-east-1a", "us-east-1b"),
    "us-west-2": ("us-west-2a", "us-west-2b"),
    "eu-west-1": ("eu-west-1a", "eu-west-1b"),
}
TYPES = ("g4dn.xlarge", "g4dn.2xlarge")
INSTANCES = 100

SPEC = f"""
name: bench
backend: cloud
capacity:
  gpus: {INSTANCES}
  accelerators: {{T4: 1.0}}
  gpus_per_node: {{min: 1, max: 1}}
diversification:
  max_pool_share: 0.09
providers:
  aws:
    regions: [{", ".join(REGIONS)}]
    ami: {aws_world.MOTO_AMI}
    on_demand: false
"""


def prices() -> dict[str, float]:
    """The 12 benchmark pools at 0.20-0.31 USD/h; every other pool costs the default 5 USD/h."""
    pools = [f"{t} {z}" for zones in REGIONS.values() for z in zones for t in TYPES]
    return {pool: round(0.20 + 0.01 * n, 2) for n, pool in enumerate(pools)}


def up(world: aws_world.AwsWorld, tmp: Path, parallel: int, latency: float) -> dict[str, float]:
    world.reset()
    world.proxy.prices(prices(), default=5.0)
    world.proxy.on_demand_prices({f"{r} {t}": 0.526 + 0.226 * n for r in REGIONS for n, t in enumerate(TYPES)})
    home = Path(tempfile.mkdtemp(dir=tmp))
    spec = home / "bench.yaml"
    spec.write_text(SPEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPOTFLEET_", "AWS_"))}
    env.update(world.env, SPOTFLEET_HOME=str(home / "home"), SPOTFLEET_CACHE_DIR=str(home / "cache"))
    # warm the offer cache first, so both runs plan from the same facts and time only up itself
    subprocess.run([FLEET_BIN, "plan", str(spec), "--json"], env=env, capture_output=True, timeout=600, check=True)
    world.proxy.state.latency = latency
    world.proxy.reset_stats()
    started = time.monotonic()
    proc = subprocess.run(
        [FLEET_BIN, "up", str(spec), "--yes", "--json", "--parallel", str(parallel)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"fleet up failed ({proc.returncode}): {proc.stderr[-2000:]}")
    report = json.loads(proc.stdout)
    launched = len(report["launched"])
    pools = len(report["desired"])
    stats = world.proxy.stats()
    calls = sum(stats.values())
    return {
        "seconds": elapsed,
        "launched": launched,
        "pools": pools,
        "api_calls": calls,
        "create_fleet_calls": stats.get("CreateFleet", 0),
        "api_calls_per_instance": calls / max(1, launched),
        "create_fleet_per_instance": stats.get("CreateFleet", 0) / max(1, launched),
    }


def main() -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency", type=float, default=0.1, help="seconds the proxy adds to every AWS request")
    args = parser.parse_args()
    world = aws_world.shared()
    with tempfile.TemporaryDirectory() as tmp:
        sequential = up(world, Path(tmp), 1, args.latency)
        parallel = up(world, Path(tmp), 32, args.latency)
    assert sequential["launched"] == parallel["launched"] == INSTANCES and parallel["pools"] == 12, (
        sequential,
        parallel,
    )
    figures = {
        "api_latency_s": args.latency,
        "instances": INSTANCES,
        "pools": parallel["pools"],
        "regions": len(REGIONS),
        "fleet_up_sequential_s": sequential["seconds"],
        "fleet_up_parallel_s": parallel["seconds"],
        "speedup": sequential["seconds"] / parallel["seconds"],
        "api_calls_per_up": parallel["api_calls"],
        "create_fleet_calls": parallel["create_fleet_calls"],
        "api_calls_per_instance": parallel["api_calls_per_instance"],
        "create_fleet_calls_per_instance": parallel["create_fleet_per_instance"],
    }
    for key, value in figures.items():
        print(f"{key:34} {value:.3f}" if isinstance(value, float) else f"{key:34} {value}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "python": platform.python_version(),
                "cores": os.cpu_count(),
                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "figures": figures,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"saved {RESULTS}")
    return figures


if __name__ == "__main__":
    main()
