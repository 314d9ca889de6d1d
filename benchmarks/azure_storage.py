"""Azure checkpoint storage through ARM: ARM calls and wall time of ``ensure_bucket``, first run and rerun.

The adapter (real azure-mgmt clients) runs against the fake ARM server (tests/fakes/azure_arm.py)
with a fixed added latency per ARM answer (``--latency``, 0.05 s by default) and polling at 0 s.
The first run creates the resource group, storage account, container, lifecycle rule, node
identity and role assignment; the rerun (a fresh adapter, as in another ``fleet up``) only reads.
Measured: seconds and ARM calls of each run, per route, and the writes the fake recorded.

Run: ``python benchmarks/azure_storage.py``; prints the figures and saves
``benchmarks/results/azure_storage.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fakes"))
from azure_arm import SUBSCRIPTION, ArmServer  # noqa: E402

from providers.azure.arm import Arm  # noqa: E402
from providers.azure.provider import AzureProvider  # noqa: E402
from providers.azure.settings import AzureSettings  # noqa: E402
from providers.base import StorageSpec  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "azure_storage.json"
SPEC = StorageSpec(
    provider="azure", bucket="bench-checkpoints", region="eastus", expire_days=7, prefix="bench", fleet="bench"
)


def _run(url: str) -> dict:
    before = httpx.get(f"{url}/_control/calls").json()["calls"]
    writes = httpx.get(f"{url}/_control/storage/state").json()["writes"]
    provider = AzureProvider(
        AzureSettings(resource_group="bench"),
        environ={},
        live_prices=False,
        arm=Arm(SUBSCRIPTION, url, polling_interval=0),
    )
    start = time.perf_counter()
    provider.ensure_bucket(SPEC)
    seconds = time.perf_counter() - start
    after = httpx.get(f"{url}/_control/calls").json()["calls"]
    routes = {
        k: after[k] - before.get(k, 0) for k in sorted(after) if after[k] != before.get(k, 0) and "_control" not in k
    }
    return {
        "seconds": round(seconds, 3),
        "calls": sum(routes.values()),
        "routes": routes,
        "writes": httpx.get(f"{url}/_control/storage/state").json()["writes"] - writes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds added to every ARM answer")
    args = parser.parse_args()
    server = ArmServer(port=0).start()
    try:
        httpx.post(f"{server.url}/_control/reset", json={"latency": args.latency}).raise_for_status()
        first, rerun = _run(server.url), _run(server.url)
    finally:
        server.stop()
    result = {
        "latency_s": args.latency,
        "first": first,
        "rerun": rerun,
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
    }
    for name in ("first", "rerun"):
        run = result[name]
        print(f"{name:6s} {run['seconds']:6.2f} s  {run['calls']:3d} ARM calls  {run['writes']} writes")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
