"""100 Azure VMs as one Flexible priority-mix scale set vs as 100 individual VMs: ARM calls and wall time.

Both adapters (``providers.azure``: ``launch_mode: vms`` and ``scale-set``) drive the real
azure-mgmt clients against the fake ARM server (tests/fakes/azure_arm.py) with a fixed added
latency per ARM answer (``--latency``, 0.02 s by default) and operation polling at 0 s. The fleet
asks eastus for ``--vms`` VMs of Standard_NC24ads_A100_v4: ``--on-demand`` of them Regular, the
rest Spot, as two launch requests made at once (the executor launches pools in parallel; the
scale-set adapter takes both in one ``launch_group``). Measured per mode: wall seconds of the
launch (the resource group and VNet included), of terminating everything, and the ARM calls the
fake saw during the launch, per route.

Run: ``python benchmarks/azure_scaleset.py``; prints the figures and saves
``benchmarks/results/azure_scaleset.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fakes"))
from azure_arm import SUBSCRIPTION, ArmServer  # noqa: E402

from fleet.model import LaunchRequest, Market, fleet_tags  # noqa: E402
from providers.azure.arm import Arm  # noqa: E402
from providers.azure.provider import AzureProvider  # noqa: E402
from providers.azure.scaleset_provider import AzureScaleSetProvider  # noqa: E402
from providers.azure.settings import AzureSettings  # noqa: E402
from providers.base import OfferQuery  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "azure_scaleset.json"
SIZE = "Standard_NC24ads_A100_v4"


def _requests(provider: AzureProvider, vms: int, on_demand: int, mode: str) -> list[LaunchRequest]:
    offers = [
        o
        for o in provider.list_offers(OfferQuery(regions=("eastus",)))
        if o.pool.instance_type == SIZE and o.pool.zone in ("", "1")
    ]
    out = []
    for market, count in ((Market.ON_DEMAND, on_demand), (Market.SPOT, vms - on_demand)):
        offer = next(o for o in offers if o.market is market)
        out.append(
            LaunchRequest(
                fleet="bench",
                offer=offer,
                count=count,
                token=f"{mode}-{market.value}",
                tags=fleet_tags("bench", offer.pool, "p1"),
            )
        )
    return out


def run_once(server: ArmServer, mode: str, vms: int, on_demand: int, latency: float) -> dict:
    capacity = {f"eastus/{SIZE}/{p}": 2 * vms for p in ("Spot", "Regular")}
    httpx.post(f"{server.url}/_control/reset", json={"capacity": capacity}).raise_for_status()
    cls = AzureScaleSetProvider if mode == "scale-set" else AzureProvider
    provider = cls(
        AzureSettings(resource_group="bench", launch_mode=mode),
        environ={},
        cache_seconds=3600,
        live_prices=False,
        arm=Arm(SUBSCRIPTION, server.url, polling_interval=0),
        home=Path(tempfile.mkdtemp(prefix="spotfleet-bench-")),
    )
    requests = _requests(provider, vms, on_demand, mode)
    httpx.post(f"{server.url}/_control/reset", json={"capacity": capacity, "latency": latency}).raise_for_status()
    start = time.perf_counter()
    if mode == "scale-set":
        results = provider.launch_group(requests)
    else:
        with ThreadPoolExecutor(max_workers=len(requests)) as ex:
            results = list(ex.map(provider.launch, requests))
    up = time.perf_counter() - start
    calls = {
        k: n
        for k, n in httpx.get(f"{server.url}/_control/calls").json()["calls"].items()
        if not k.startswith("GET _control")
    }
    made = [i for r in results for i in r.instances]
    if len(made) != vms or any(r.error_kind for r in results):
        raise SystemExit(f"{mode}: made {len(made)} of {vms}: {[r.error_message for r in results]}")
    start = time.perf_counter()
    provider.terminate([i.id for i in made])
    down = time.perf_counter() - start
    total = sum(calls.values())
    return {
        "mode": mode,
        "latency_s": latency,
        "vms": vms,
        "regular": on_demand,
        "spot": vms - on_demand,
        "launch_seconds": round(up, 3),
        "terminate_seconds": round(down, 3),
        "arm_calls_during_launch": total,
        "arm_calls_per_vm": round(total / vms, 2),
        "calls_by_route": calls,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vms", type=int, default=100)
    parser.add_argument("--on-demand", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.02)
    args = parser.parse_args()
    server = ArmServer(port=0).start()
    try:
        runs = [run_once(server, mode, args.vms, args.on_demand, args.latency) for mode in ("vms", "scale-set")]
    finally:
        server.stop()
    for r in runs:
        print(
            f"{r['mode']:>9}: {r['vms']} VMs ({r['regular']} Regular, {r['spot']} Spot) in {r['launch_seconds']:.2f}s, "
            f"{r['arm_calls_during_launch']} ARM calls ({r['arm_calls_per_vm']:.2f} per VM); "
            f"terminate {r['terminate_seconds']:.2f}s"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {"benchmark": "azure_scaleset", "python": platform.python_version(), "cpus": os.cpu_count(), "runs": runs},
            indent=2,
        )
        + "\n"
    )
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
