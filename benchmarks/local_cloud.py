"""How fast the embedded local cloud answers: offers, launches, listing, terminating, preemptions.

Prints a table and saves ``benchmarks/results/local_cloud.json``. Run:
``python benchmarks/local_cloud.py`` (a few seconds on a laptop core).
"""

from __future__ import annotations

import json
import platform
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fleet.model import LaunchRequest, Offer, fleet_tags
from providers.base import OfferQuery
from providers.local import LocalCloud

RESULTS = Path(__file__).parent / "results" / "local_cloud.json"
POOLS, PER_POOL = 20, 50
LATENCY = 0.2  # real seconds per API call in the latency run: a quick cloud API round trip


def timed(fn, repeat: int = 1) -> float:
    """Median seconds of ``repeat`` calls of ``fn``."""
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def on_demand_pools(cloud: LocalCloud) -> list[Offer]:
    offers = cloud.provider("aws").list_offers(OfferQuery(on_demand=True, spot=False))
    return sorted(offers, key=lambda o: o.pool.id)[:POOLS]


def launch_all(cloud: LocalCloud, offers: list[Offer], fleet: str, workers: int) -> float:
    aws = cloud.provider("aws")
    requests = [
        LaunchRequest(fleet=fleet, offer=o, count=PER_POOL, token=f"{fleet}-{k}", tags=fleet_tags(fleet, o.pool))
        for k, o in enumerate(offers)
    ]
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(aws.launch, requests))
    elapsed = time.perf_counter() - t
    assert sum(len(r.instances) for r in results) == POOLS * PER_POOL
    return elapsed


def main() -> dict[str, float]:
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cloud = LocalCloud.open(Path(tmp) / "c", time_scale=0)
        for name in cloud.provider_names():
            provider = cloud.provider(name)
            out[f"list_offers_{name}_s"] = timed(lambda: provider.list_offers(OfferQuery()), 5)
        offers = on_demand_pools(cloud)
        out["launch_1000_over_20_pools_sequential_s"] = launch_all(cloud, offers, "seq", 1)
        out["launch_1000_over_20_pools_8_threads_s"] = launch_all(cloud, offers, "par", 8)
        aws = cloud.provider("aws")
        out["list_instances_1000_s"] = timed(lambda: aws.list_instances("seq"), 10)
        ids = [i.id for i in aws.list_instances("seq")]
        out["terminate_1000_s"] = timed(lambda: aws.terminate(ids))

        spot = [o for o in aws.list_offers(OfferQuery(on_demand=False)) if (o.capacity_hint or 0) >= 20][:50]
        for k, o in enumerate(spot):
            aws.launch(
                LaunchRequest(fleet="spot", offer=o, count=20, token=f"spot-{k}", tags=fleet_tags("spot", o.pool))
            )
        alive = len(aws.list_instances("spot"))
        per_hour = [timed(lambda: cloud.advance(3600)) for _ in range(24)]
        out["spot_instances"] = alive
        out["spot_preempted_in_24_sim_hours"] = alive - len(aws.list_instances("spot"))
        out["advance_one_sim_hour_median_s"] = statistics.median(per_hour)

        slow = LocalCloud.open(Path(tmp) / "slow", time_scale=0, api_latency=LATENCY)
        offers = on_demand_pools(slow)
        seq = launch_all(slow, offers, "seq", 1)
        par = launch_all(slow, offers, "par", POOLS)
        out[f"api_latency_{LATENCY}_launch_20_pools_sequential_s"] = seq
        out[f"api_latency_{LATENCY}_launch_20_pools_parallel_s"] = par
        out[f"api_latency_{LATENCY}_parallel_speedup"] = seq / par
    return out


if __name__ == "__main__":
    figures = main()
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:.4f}" if isinstance(value, float) else f"{key:<{width}}  {value}")
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
