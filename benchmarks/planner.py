#!/usr/bin/env python3
"""Planner speed, exactness and plan quality.

1. Speed: median wall time of ``plan()`` (``--runs`` runs) on the shipped snapshot and on
   synthetic catalogs of 1k, 10k and 100k pools, for every strategy; pools left after the
   spec's rules and after dominance pruning. Target: the default strategy on 100k pools in
   under 1 s on a 2-core machine.
2. Exactness: the same objective from an independent solve -- the plain MILP over every
   allowed pool (no pruning, no reduced-cost fixing) where it finishes within
   ``--independent-limit`` seconds per MILP, and exhaustive search on ``--small`` random
   small instances (price-capacity-optimized and lowest-price, both workload models; the
   unit tests also check the other strategies this way).
3. Quality, for the three example specs on the snapshot: expected true cost per weighted
   GPU-hour of our plan against (a) the cheapest all-on-demand fleet, (b) cheapest-first
   greedy (what SkyPilot and dstack do: fill the on-demand baseline, then the cheapest
   $/weighted-GPU pools first, no caps), (c) the cheapest single pool holding the whole
   target (a one-zone cluster; it ignores the baseline). All use the pools the spec allows
   and the spec's workload model; the baselines ignore the budget.

    python benchmarks/planner.py [--runs 5] [--small 200] [--independent-limit 120]

Prints tables and writes benchmarks/results/planner.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit"))

from planner_oracle import brute_force, offer  # noqa: E402

from fleet import economics, milp, strategies  # noqa: E402
from fleet.candidates import select  # noqa: E402
from fleet.catalog import filter_for_spec, snapshot_offers  # noqa: E402
from fleet.errors import PlanError  # noqa: E402
from fleet.model import InterruptionSource, Market, Offer, PoolKey  # noqa: E402
from fleet.planner import plan  # noqa: E402
from fleet.pruning import prune  # noqa: E402
from fleet.spec import FleetSpec, Strategy, load_spec, parse_spec  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "planner.json"
EXAMPLES = ("h100-multicloud", "llm-pretrain-coupled", "batch-inference")
BENCH_SPEC = """name: bench
capacity: {gpus: 64, accelerators: {H100: 1.0, H200: 1.3, A100-80GB: 0.6}, on_demand_gpus: 16}
diversification: {max_pool_share: 0.25, min_pools: 4}
strategy: %s
workload: {kind: %s}
"""
CASES = [("price-capacity-optimized", "independent"), ("price-capacity-optimized", "coupled"),
         ("lowest-price", "independent"), ("capacity-optimized", "independent"), ("diversified", "independent")]
ACCELERATORS = (("H100", 2.4), ("H200", 3.1), ("A100-80GB", 1.4))
PRIORS = {"aws": 0.10, "gcp": 0.20, "azure": 0.15, "runpod": 0.12, "vast": 0.25}


def synthetic_offers(pools: int, seed: int = 0) -> list[Offer]:
    """``pools`` offers: instance types in zones of five clouds, on-demand and spot, list
    prices around each accelerator's base, spot at 25-70% of on-demand, rates around the
    provider priors, a capacity hint on a third of the spot pools."""
    rng = random.Random(seed)
    out: list[Offer] = []
    while len(out) < pools:
        provider = rng.choice(list(PRIORS))
        acc, base = rng.choice(ACCELERATORS)
        gpus = rng.choice((1, 2, 4, 8))
        region = f"{provider}-r{rng.randrange(30)}"
        key = dict(provider=provider, region=region, zone=f"{region}-{rng.randrange(6)}",
                   instance_type=f"{acc.lower()}x{gpus}-{rng.randrange(10**6)}")
        od = round(base * gpus * rng.uniform(1.2, 3.0), 4)
        out.append(Offer(pool=PoolKey(**key, market=Market.ON_DEMAND), accelerator=acc, gpus=gpus,
                         price_per_hour=od, on_demand_price=od))
        if len(out) < pools:
            out.append(Offer(pool=PoolKey(**key, market=Market.SPOT), accelerator=acc, gpus=gpus,
                             price_per_hour=round(od * rng.uniform(0.25, 0.7), 4), on_demand_price=od,
                             interruptions_per_hour=round(PRIORS[provider] * rng.uniform(0.3, 3.0), 4),
                             interruption_source=InterruptionSource.PROVIDER_PRIOR,
                             capacity_hint=rng.randrange(1, 12) if rng.random() < 0.33 else None))
    return out


def median_time(fn, runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def objective(spec: FleetSpec, p) -> float:
    t = p.totals
    return t.price_per_hour if spec.strategy is Strategy.LOWEST_PRICE else t.true_cost_per_hour


def independent_solve(spec: FleetSpec, offers: list[Offer], limit: float) -> tuple[float | None, float]:
    """The price-capacity / lowest-price objective from the plain MILP over every allowed pool."""
    cand = select(spec, offers)
    min_pools = min(spec.diversification.min_pools, int(cand.spot.sum()))
    model = milp.Model(cand, float(spec.capacity.gpus), float(spec.capacity.on_demand_gpus),
                       spec.budget.max_per_hour, min_pools, fixing=False, time_limit=limit)
    t = time.perf_counter()
    out = strategies.solve(spec.strategy, model, spec.workload, replan=False)
    elapsed = time.perf_counter() - t
    if out.counts is None or out.notes:
        return None, elapsed                       # infeasible or not proven within the limit
    c = cand
    if spec.strategy is Strategy.LOWEST_PRICE:
        return float(c.price @ out.counts), elapsed
    groups = ((int(n), float(p), float(r)) for n, p, r in zip(out.counts, c.price, c.rate) if n)
    return economics.fleet_true_cost_per_hour(groups, spec.workload), elapsed


def speed(runs: int, limit: float) -> list[dict]:
    catalogs = [("snapshot", list(snapshot_offers()))] + [(f"synthetic-{n // 1000}k", synthetic_offers(n))
                                                           for n in (1_000, 10_000, 100_000)]
    rows = []
    for name, offers in catalogs:
        for strategy, kind in CASES:
            spec = parse_spec(BENCH_SPEC % (strategy, kind))
            n = runs if len(offers) < 50_000 or (strategy, kind) == CASES[0] else max(1, runs // 2)
            seconds, p = median_time(lambda: plan(spec, offers), n)
            cand = select(spec, offers)
            row = dict(catalog=name, offers=len(offers), strategy=strategy, workload=kind, runs=n,
                       median_seconds=round(seconds, 4), allowed_pools=len(cand),
                       after_pruning=len(prune(cand, spec.capacity.gpus, spec.diversification.min_pools)),
                       feasible=p.feasible, objective=round(objective(spec, p), 4))
            if strategy in ("price-capacity-optimized", "lowest-price") and len(cand) <= 20_000:
                ref, ref_seconds = independent_solve(spec, offers, limit)
                row["independent_seconds"] = round(ref_seconds, 3)
                row["gap_vs_independent"] = None if ref is None else objective(spec, p) / ref - 1
            rows.append(row)
            print(f"{name:>15} {strategy:>25} {kind:>11}  {seconds:7.3f} s  pools {len(cand):>6} -> "
                  f"{row['after_pruning']:>5}  gap {row.get('gap_vs_independent', '-')}", flush=True)
    return rows


def exhaustive(count: int) -> dict:
    """Random small instances (<= 4 pools, <= 8 GPUs): our objective vs exhaustive search."""
    rng = random.Random(1)
    worst, checked, infeasible_agree = 0.0, 0, 0
    for _ in range(count):
        offers = [offer(provider=rng.choice(["aws", "gcp"]), zone=f"z{i}", itype=f"t{i}", spot=rng.random() < 0.7,
                        gpus=rng.choice([1, 2, 4, 8]), acc=rng.choice(["H100", "A100-80GB"]),
                        price=round(rng.uniform(0.5, 20), 2), rate=round(rng.uniform(0, 1.5), 3),
                        hint=rng.choice([None, None, 2, 4])) for i in range(rng.randint(1, 4))]
        target = rng.randint(1, 8)
        strategy = rng.choice(["price-capacity-optimized", "lowest-price"])
        spec = parse_spec(f"name: small\ncapacity: {{gpus: {target}, accelerators: {{H100: 1.0, A100-80GB: 0.6}}, "
                          f"on_demand_gpus: {rng.randint(0, target) if rng.random() < 0.4 else 0}}}\n"
                          f"strategy: {strategy}\nworkload: {{kind: {rng.choice(['independent', 'coupled'])}}}\n"
                          f"diversification: {{max_pool_share: {rng.choice([0.25, 0.5, 1.0])}, "
                          f"min_pools: {rng.randint(1, 3)}}}\n"
                          + (f"budget: {{max_per_hour: {rng.randint(5, 60)}}}\n" if rng.random() < 0.3 else ""))
        _, best = brute_force(spec, offers)
        try:
            p = plan(spec, offers)
        except PlanError:               # no offer passes the rules: nothing to compare
            infeasible_agree += best is None
            continue
        if best is None:
            infeasible_agree += not p.feasible
            continue
        checked += 1
        worst = max(worst, objective(spec, p) / best.key[0] - 1)
    return dict(instances=count, feasible_compared=checked, infeasible_agreed=infeasible_agree,
                max_relative_gap=worst)


def baseline_costs(spec: FleetSpec, offers: list[Offer]) -> dict[str, float | None]:
    """True cost per weighted GPU-hour of the three naive fleets (see the module docstring)."""
    cand = select(spec.model_copy(update={"budget": spec.budget.model_copy(update={"max_per_hour": None})}), offers)
    target, base = float(spec.capacity.gpus), float(spec.capacity.on_demand_gpus)
    w, price, rate = cand.weighted, cand.price, cand.rate
    hint = np.where(np.isinf(cand.hint), 10**9, cand.hint).astype(np.int64)

    def cost(counts: np.ndarray) -> float:
        used = np.flatnonzero(counts)
        groups = [(int(counts[i]), float(price[i]), float(rate[i])) for i in used]
        return economics.fleet_true_cost_per_hour(groups, spec.workload) / float(w @ counts)

    def greedy(pools: np.ndarray, need: float, counts: np.ndarray) -> float:
        for i in pools[np.argsort(price[pools] / w[pools], kind="stable")]:
            if need <= 1e-9:
                break
            take = min(int(hint[i]), math.ceil(need / w[i] - 1e-9))
            counts[i] += take
            need -= take * w[i]
        return need

    od = np.flatnonzero(~cand.spot)
    on_demand = np.zeros(len(cand), np.int64)
    all_od = None if greedy(od, target, on_demand) > 1e-9 else on_demand
    mixed = np.zeros(len(cand), np.int64)
    left = greedy(od, base, mixed)
    left = greedy(np.arange(len(cand)), target - float(w @ mixed), mixed) + left
    single, best = None, math.inf
    for i in range(len(cand)):
        n = math.ceil(target / w[i] - 1e-9)
        if n <= hint[i]:
            counts = np.zeros(len(cand), np.int64)
            counts[i] = n
            value = cost(counts)
            if value < best:
                single, best = counts, value
    return {"all_on_demand": None if all_od is None else cost(all_od),
            "cheapest_first_greedy": None if left > 1e-9 else cost(mixed),
            "cheapest_single_pool": None if single is None else best}


def quality() -> list[dict]:
    rows = []
    for name in EXAMPLES:
        spec = load_spec(ROOT / "examples" / f"{name}.yaml")
        offers = filter_for_spec(snapshot_offers(), spec)
        p = plan(spec, offers)
        ours = p.totals.true_cost_per_weighted_gpu_hour
        naive = baseline_costs(spec, offers)
        row = dict(spec=name, strategy=spec.strategy.value, workload=spec.workload.kind.value, feasible=p.feasible,
                   ours=round(ours, 4), **{k: None if v is None else round(v, 4) for k, v in naive.items()})
        row["ours_vs"] = {k: None if v is None else round(ours / v - 1, 4) for k, v in naive.items()}
        rows.append(row)
        print(f"{name:>22}  ours ${ours:.3f}  " + "  ".join(
            f"{k} {'-' if v is None else f'${v:.3f}'}" for k, v in naive.items()), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--small", type=int, default=200, help="random small instances for exhaustive search")
    ap.add_argument("--independent-limit", type=float, default=120.0, help="seconds for the plain MILP")
    args = ap.parse_args()
    print("speed (median wall seconds) and exactness vs the plain MILP")
    rows = speed(args.runs, args.independent_limit)
    print("exhaustive search on small instances")
    small = exhaustive(args.small)
    print(f"  {small}")
    print("plan quality: expected true cost per weighted GPU-hour (examples, snapshot)")
    examples = quality()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "target": "default strategy, 100k pools, under 1 s",
        "speed": rows, "exhaustive": small, "quality": examples}, indent=2) + "\n")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
