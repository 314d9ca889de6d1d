"""GCP launch cost: 100 Spot VMs over 10 zones, ``bulkInsert`` against one ``insert`` per VM.

Drives the real adapter (google-cloud-compute, REST) against the fake Compute Engine server
(``tests/fakes/gce_server.py``, its own process) with a fixed latency added to every API call,
the way ``fleet up`` launches: the 10 zones' launches in parallel. Counts the API calls the fake
served per method and the wall time, then terminates the 100 VMs. Prints a table and saves
``benchmarks/results/gcp_launch.json``. Run: ``python benchmarks/gcp_launch.py [--latency 0.1]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes.gce_server import control  # noqa: E402

from fleet.model import LaunchRequest, Market, fleet_tags  # noqa: E402
from providers.base import OfferQuery  # noqa: E402
from providers.gcp.provider import GceApi, GcpProvider  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "gcp_launch.json"
ZONES, PER_ZONE = 10, 10
SHAPE = "n1-standard-4+nvidia-tesla-t4x1"


def start_fake(latency: float) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "fakes" / "gce_server.py"),
            "--port",
            str(port),
            "--latency",
            str(latency),
        ],
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(f"{url}/_fake/stats", timeout=1).close()
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the fake Compute Engine server did not start")


def run(url: str, latency: float, bulk: bool) -> dict[str, object]:
    control(url, "reset", {})
    control(url, "latency", {"seconds": 0})
    gcp = GcpProvider("bench", api=GceApi("bench", endpoint=url), bulk=bulk)
    offers = sorted(
        (
            o
            for o in gcp.list_offers(OfferQuery(on_demand=False))
            if o.pool.instance_type == SHAPE and o.market is Market.SPOT
        ),
        key=lambda o: o.pool.zone,
    )[:ZONES]
    assert len(offers) == ZONES, f"the fake offers {SHAPE} in {len(offers)} zones"
    control(url, "reset", {})
    control(url, "latency", {"seconds": latency})
    requests = [
        LaunchRequest(
            fleet="bench",
            offer=o,
            count=PER_ZONE,
            token=f"bench-{bulk}-{o.pool.zone}",
            tags=fleet_tags("bench", o.pool),
        )
        for o in offers
    ]
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=ZONES) as pool:
        results = list(pool.map(gcp.launch, requests))
    launch_s = time.perf_counter() - t
    launched = [i.id for r in results for i in r.instances]
    assert len(launched) == ZONES * PER_ZONE and not any(r.error_kind for r in results)
    launch_calls = control(url, "stats")
    t = time.perf_counter()
    gcp.terminate(launched)
    terminate_s = time.perf_counter() - t
    assert gcp.list_instances("bench") == []
    return {
        "launch_s": launch_s,
        "launch_api_calls": sum(launch_calls.values()),
        "launch_calls": launch_calls,
        "terminate_s": terminate_s,
    }


def main() -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--latency", type=float, default=0.1, help="seconds added to every API call")
    args = parser.parse_args()
    proc, url = start_fake(args.latency)
    try:
        out: dict[str, object] = {"vms": ZONES * PER_ZONE, "zones": ZONES, "latency_s": args.latency}
        for mode, bulk in (("bulk_insert", True), ("insert_per_vm", False)):
            for key, value in run(url, args.latency, bulk).items():
                out[f"{mode}_{key}"] = value
        calls = (out["insert_per_vm_launch_api_calls"], out["bulk_insert_launch_api_calls"])
        out["insert_per_vm_over_bulk_calls"] = calls[0] / calls[1]
        out["insert_per_vm_over_bulk_time"] = out["insert_per_vm_launch_s"] / out["bulk_insert_launch_s"]
        return out
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    figures = main()
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:.3f}" if isinstance(value, float) else f"{key:<{width}}  {value}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "python": platform.python_version(),
                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "figures": figures,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"saved {RESULTS}")
