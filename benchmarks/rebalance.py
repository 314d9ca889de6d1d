"""The rebalancer: decision time of one pass for a 1,000-instance fleet over 200 pools, and a
simulated day on the local cloud with hourly passes.

1. ``decide()`` alone (pure, in-process) on a synthetic catalog of 200 pools (190 spot pools
   over 4 providers, 10 on-demand), a fleet of 1,000 nodes of 8 H100, in four situations:
   steady (nothing to do), 5% of spot lost (replace, with back-off on the pools that lost),
   spot gone in half the pools (refill, on-demand only up to the critical level), and 100
   on-demand fallback nodes ready to return to spot (disruption budget 10). Median of
   ``--repeat`` runs each.
2. A day on the embedded local cloud (its seeded market preempts spot and closes pools as a
   real one would): ``fleet up`` of 256 weighted GPUs (baseline 32, critical level 128),
   then a rebalancing pass every hour (in-process ``run_pass``, the code ``fleet rebalance``
   runs), the clock advanced in 5-minute steps; then the same day with a pass every 10
   minutes. Reported: share of the day at target (sampled every 5 minutes), on-demand
   node-hours beyond the baseline (the fallback, plus what the planner itself preferred),
   spot interruptions, and moves per day (launches and terminations the rebalancer made).

Run: ``python benchmarks/rebalance.py`` (a few minutes on two cores). Prints the figures and
saves ``benchmarks/results/rebalance.json``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from fleet.catalog import Catalog, filter_for_spec
from fleet.model import InterruptionSource, Market, Offer, PoolKey
from fleet.planning.planner import plan as make_plan
from fleet.provisioning.executor import apply
from fleet.rebalance import ObservedInstance, PoolEvent, decide
from fleet.rebalance.cycle import run_pass
from fleet.spec import parse_spec
from fleet.state import open_store
from providers.base import OfferQuery
from providers.local import LocalCloud

RESULTS = Path(__file__).parent / "results" / "rebalance.json"
NOW = 1_800_000_000.0

BIG_SPEC = """
name: big
capacity: {gpus: 8000, accelerators: [H100], gpus_per_node: {min: 8, max: 8}, on_demand_gpus: 400}
diversification: {min_pools: 50, max_pool_share: 0.03}
rebalance: {critical_gpus: 4000, max_moves_per_pass: 10}
"""

DAY_SPEC = """
name: day
backend: local
capacity: {gpus: 256, accelerators: [H100], gpus_per_node: {min: 8, max: 8}, on_demand_gpus: 32}
diversification: {min_pools: 6, max_pool_share: 0.2}
rebalance: {critical_gpus: 128, max_moves_per_pass: 4, min_fallback_age_seconds: 3600}
"""


# ---- 1. decision time ---------------------------------------------------------------------


def synthetic_offers(closed: set[int] = frozenset()) -> list[Offer]:
    """190 spot pools (capacity hint 40; 0 for ``closed`` ones) and 10 on-demand pools."""
    offers = []
    for k in range(190):
        pool = PoolKey(
            provider=("aws", "gcp", "azure", "vast")[k % 4],
            region=f"region-{k // 19}",
            zone=f"zone-{k}",
            instance_type="h100x8",
            market=Market.SPOT,
        )
        offers.append(
            Offer(
                pool=pool,
                accelerator="H100",
                gpus=8,
                price_per_hour=14 + (k * 37 % 100) / 10,
                on_demand_price=80.0,
                interruptions_per_hour=0.002 + (k * 13 % 50) / 5000,
                interruption_source=InterruptionSource.PROVIDER_PRIOR,
                capacity_hint=0 if k in closed else 40,
            )
        )
    for k in range(10):
        pool = PoolKey(
            provider=("aws", "gcp", "azure", "vast", "aws")[k % 5],
            region=f"region-{k}",
            zone="",
            instance_type="h100x8",
            market=Market.ON_DEMAND,
        )
        offers.append(Offer(pool=pool, accelerator="H100", gpus=8, price_per_hour=70 + k, on_demand_price=70 + k))
    return offers


def nodes(offers: list[Offer], counts: dict[str, int], *, age: float = 5 * 3600) -> list[ObservedInstance]:
    by_id = {o.pool.id: o for o in offers}
    out = []
    for pool, n in sorted(counts.items()):
        o = by_id[pool]
        out += [
            ObservedInstance(
                id=f"{o.pool.zone}-{o.pool.region}-{o.market.value}-{j}",
                pool=pool,
                market=o.market,
                accelerator="H100",
                gpus=8,
                price_per_hour=o.price_per_hour,
                launched_at=NOW - age,
            )
            for j in range(n)
        ]
    return out


def decision_times(repeat: int) -> dict[str, float]:
    spec = parse_spec(BIG_SPEC)
    offers = synthetic_offers()
    steady_plan = make_plan(spec, offers)
    counts = steady_plan.counts()
    assert sum(counts.values()) == 1000, sum(counts.values())
    steady = nodes(offers, counts)
    spot = [i for i in steady if i.market is Market.SPOT]
    lost = spot[::20]  # 5% of the spot nodes
    lost_ids = {i.id for i in lost}
    events = [PoolEvent(i.pool, "interrupted", NOW - 120) for i in lost]
    short = [i for i in steady if i.id not in lost_ids]
    closed = {k for k in range(190) if k % 2}
    half_offers = synthetic_offers(closed)
    open_pools = {o.pool.id for o in half_offers if o.capacity_hint != 0}
    halved = [i for i in steady if i.market is Market.ON_DEMAND or i.pool in open_pools]
    od_pool = min((o for o in offers if o.market is Market.ON_DEMAND), key=lambda o: o.price_per_hour)
    fallback = (
        [i for i in steady if i.market is Market.ON_DEMAND]
        + spot[: len(spot) - 100]
        + nodes(offers, {od_pool.pool.id: 100}, age=3 * 3600)
    )
    cases = {
        "steady": (offers, steady, []),
        "replace_5pct_lost": (offers, short, events),
        "spot_gone_in_half_the_pools": (half_offers, halved, []),
        "return_100_fallback_nodes": (offers, fallback, []),
    }
    out: dict[str, float] = {}
    for name, (offs, insts, evs) in cases.items():
        times = []
        decision = None
        for _ in range(repeat):
            started = time.perf_counter()
            decision = decide(spec, offs, insts, evs, NOW)
            times.append(time.perf_counter() - started)
        assert decision is not None
        out[f"decide_1000x200_{name}_s"] = statistics.median(times)
        out[f"decide_1000x200_{name}_actions"] = len(decision.actions)
        out[f"decide_1000x200_{name}_short_weighted_gpus"] = decision.short_weighted_gpus
    return out


# ---- 2. a simulated day -------------------------------------------------------------------


def simulated_day(tmp: Path, pass_minutes: int = 60, step_minutes: int = 5) -> dict[str, float]:
    cloud = LocalCloud.open(tmp / "localcloud", time_scale=0, seed=7)
    providers = {n: cloud.provider(n) for n in cloud.provider_names()}
    spec = parse_spec(DAY_SPEC)
    store = open_store(str(tmp / "state.db"))

    def offers() -> list[Offer]:
        found, _ = Catalog(providers=providers).offers(OfferQuery(accelerators=("H100",)))
        return filter_for_spec(found, spec)

    store.save_fleet(
        spec.name, status="planned", spec_json=spec.model_dump_json(), spec_hash=spec.spec_hash(), backend="local"
    )
    with store.lock(spec.name, "up"):
        report = apply(make_plan(spec, offers()), providers, store)
    assert report.ok, report.to_dict()

    def alive() -> tuple[float, float]:
        mine = [i for i in cloud.all_instances(alive_only=True) if i.fleet == spec.name]
        total = sum(spec.weight(i.accelerator) * i.gpus for i in mine)
        od = sum(spec.weight(i.accelerator) * i.gpus for i in mine if i.pool.market is Market.ON_DEMAND)
        return total, od

    steps_per_pass = pass_minutes // step_minutes
    at_target = samples = 0
    fallback_node_hours = 0.0
    launches = terminations = returns = interruptions = 0
    pass_seconds = []
    for _pass in range(24 * 60 // pass_minutes):
        for _ in range(steps_per_pass):
            cloud.advance(step_minutes * 60)
            total, od = alive()
            samples += 1
            at_target += total >= spec.capacity.gpus
            fallback_node_hours += max(0.0, od - spec.capacity.on_demand_gpus) / 8 * step_minutes / 60
        started = time.perf_counter()
        with store.lock(spec.name, "rebalance"):
            result = run_pass(spec, offers(), providers, store)
        pass_seconds.append(time.perf_counter() - started)
        interruptions += result.interruptions
        for r in result.results:
            if not r.done:
                continue
            if r.action.kind == "launch":
                launches += r.action.count
            elif r.action.kind == "terminate":
                terminations += 1
                returns += r.action.reason == "return-to-spot"
    store.close()
    tag = f"day_passes_every_{pass_minutes}m"
    return {
        f"{tag}_target_weighted_gpus": float(spec.capacity.gpus),
        f"{tag}_time_at_target_fraction": at_target / samples,
        f"{tag}_on_demand_node_hours_beyond_baseline": fallback_node_hours,
        f"{tag}_spot_interruptions": float(interruptions),
        f"{tag}_instances_launched_by_rebalancer": float(launches),
        f"{tag}_instances_terminated_by_rebalancer": float(terminations),
        f"{tag}_returns_to_spot": float(returns),
        f"{tag}_moves": float(launches + terminations),
        f"{tag}_pass_median_s": statistics.median(pass_seconds),
    }


def main() -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="decide() runs to take the median of")
    args = parser.parse_args()
    out = decision_times(args.repeat)
    for minutes in (60, 10):
        with tempfile.TemporaryDirectory() as tmp:
            out.update(simulated_day(Path(tmp), pass_minutes=minutes))
    return out


if __name__ == "__main__":
    from figures import print_and_save

    print_and_save(main(), RESULTS)
