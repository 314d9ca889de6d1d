#!/usr/bin/env python3
"""Planner speed, exactness and plan quality.

1. Speed: median wall time of ``plan()`` (``--runs`` runs) on the shipped snapshot and on
   synthetic catalogs of 1k, 10k and 100k pools, for every strategy, with the zone cap off
   (``plain``) and with zone, region and provider caps and per-provider quotas on
   (``domains+quotas``); pools left after the spec's rules and after dominance pruning.
   Target: the default strategy on 100k pools in under 1 s on a 2-core machine.
2. Exactness: the same objective from an independent solve -- the plain MILP over every
   allowed pool (no pruning, twin merging or reduced-cost fixing) where it finishes within
   ``--independent-limit`` seconds per MILP, and exhaustive search on ``--small`` random
   small instances (price-capacity-optimized and lowest-price, both workload models, random
   zone/region/provider caps and quotas; the unit tests also check the other strategies).
3. Quality, for the three example specs on the snapshot: expected true cost per weighted
   GPU-hour (and $/h, interruptions/day, the largest share of the spot capacity one reclaim
   can take) of our plan against (a) the cheapest all-on-demand fleet, (b) cheapest-first
   greedy (what SkyPilot and dstack do: fill the on-demand baseline, then the cheapest
   $/weighted-GPU pools first, no per-pool caps), (b') the same greedy held to the spec's
   per-pool caps, (c) the cheapest single pool holding the whole target (a one-zone
   cluster; it ignores the baseline). All use the pools the spec allows and the spec's
   workload model; the baselines ignore the budget. And the share of the spot part in the
   largest zone, region and provider without a zone cap (as before it existed) and with
   the default ``max_zone_share`` of 0.5.

    python benchmarks/planner.py [--runs 5] [--small 200] [--independent-limit 120]
    python benchmarks/planner.py --coupled-only [--sizes 1000,10000]   # coupled plans only
    python benchmarks/planner.py --speed-only --cases 0,1 --variants plain   # some speed rows only

``--speed-only`` saves to benchmarks/results/planner-speed.json and leaves planner.json alone.

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

from fleet.catalog import filter_for_spec, snapshot_offers  # noqa: E402
from fleet.errors import PlanError  # noqa: E402
from fleet.model import InterruptionSource, Market, Offer, PoolKey, Quota  # noqa: E402
from fleet.planning import economics, milp, strategies  # noqa: E402
from fleet.planning.candidates import select  # noqa: E402
from fleet.planning.domains import Domains, domain_name, limits_for  # noqa: E402
from fleet.planning.planner import linear_cost, plan, pool_caps  # noqa: E402
from fleet.planning.pruning import dominance_keys, prune  # noqa: E402
from fleet.spec import FleetSpec, Placement, Strategy, load_spec, parse_spec  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "planner.json"
COUPLED_RESULTS = ROOT / "benchmarks" / "results" / "planner-coupled.json"
SPEED_RESULTS = ROOT / "benchmarks" / "results" / "planner-speed.json"
EXAMPLES = ("h100-multicloud", "llm-pretrain-coupled", "batch-inference")
BENCH_SPEC = """name: bench
capacity: {gpus: 64, accelerators: {H100: 1.0, H200: 1.3, A100-80GB: 0.6}, on_demand_gpus: 16}
diversification: {max_pool_share: 0.25, min_pools: 4, %s}
strategy: %s
workload: {kind: %s}
placement: %s
"""
#: Diversification beyond pools: off (as before zone caps existed), and every cap on.
VARIANTS = {
    "plain": "max_zone_share: 1",
    "domains+quotas": "max_zone_share: 0.25, max_region_share: 0.5, max_provider_share: 0.5",
}
PLACEMENT_LEVELS = ("zone", "region", "provider")


def bench_spec(variant: str, strategy: str, kind: str, placement: str | None) -> FleetSpec:
    """The benchmark spec; caps at the placement level or coarser (which cannot hold when every
    node shares one such domain) are left out of the variant."""
    level = placement or ("region" if kind == "coupled" else "any")
    caps = [
        c
        for c in VARIANTS[variant].split(", ")
        if level == "any"
        or not any(c.startswith(f"max_{lv}_share") for lv in PLACEMENT_LEVELS[PLACEMENT_LEVELS.index(level) :])
    ]
    return parse_spec(BENCH_SPEC % (", ".join(caps) or "max_zone_share: 1", strategy, kind, placement or "null"))


def bench_quotas(variant: str) -> list[Quota]:
    """Per provider: 24 spot GPUs and 48 on-demand GPUs (with ``domains+quotas``)."""
    if variant == "plain":
        return []
    return [
        Quota(provider=p, market=m, limit=lim, name=f"bench-{m.value}")
        for p in PROVIDERS
        for m, lim in ((Market.SPOT, 24), (Market.ON_DEMAND, 48))
    ]


#: (strategy, workload, placement); ``None`` is the default: one region for a coupled job, any
#: for independent nodes. The coupled job spread over every region (``any``) is how it was
#: planned before placement existed.
CASES = [
    ("price-capacity-optimized", "independent", None),
    ("price-capacity-optimized", "coupled", None),
    ("price-capacity-optimized", "coupled", "zone"),
    ("price-capacity-optimized", "coupled", "any"),
    ("lowest-price", "independent", None),
    ("capacity-optimized", "independent", None),
    ("diversified", "independent", None),
]
ACCELERATORS = (("H100", 2.4), ("H200", 3.1), ("A100-80GB", 1.4))
PRIORS = {"aws": 0.10, "gcp": 0.20, "azure": 0.15, "runpod": 0.12, "vast": 0.25}
PROVIDERS = ("aws", "gcp", "azure", "runpod", "vast", "lambda")


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
        key = dict(
            provider=provider,
            region=region,
            zone=f"{region}-{rng.randrange(6)}",
            instance_type=f"{acc.lower()}x{gpus}-{rng.randrange(10**6)}",
        )
        od = round(base * gpus * rng.uniform(1.2, 3.0), 4)
        out.append(
            Offer(
                pool=PoolKey(**key, market=Market.ON_DEMAND),
                accelerator=acc,
                gpus=gpus,
                price_per_hour=od,
                on_demand_price=od,
            )
        )
        if len(out) < pools:
            out.append(
                Offer(
                    pool=PoolKey(**key, market=Market.SPOT),
                    accelerator=acc,
                    gpus=gpus,
                    price_per_hour=round(od * rng.uniform(0.25, 0.7), 4),
                    on_demand_price=od,
                    interruptions_per_hour=round(PRIORS[provider] * rng.uniform(0.3, 3.0), 4),
                    interruption_source=InterruptionSource.PROVIDER_PRIOR,
                    capacity_hint=rng.randrange(1, 12) if rng.random() < 0.33 else None,
                )
            )
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


def independent_solve(
    spec: FleetSpec, offers: list[Offer], limit: float, quotas: list[Quota] = ()
) -> tuple[float | None, float]:
    """The price-capacity / lowest-price objective from the plain MILP (no pruning, twin merging,
    reduced-cost fixing or domain bounds) over every allowed pool; under a placement level, the
    best over every domain of that level, each solved so."""
    cand = select(spec, offers)
    level = spec.placement_level
    names = np.array([domain_name(o, level) if level != "any" else "" for o in cand.offers], dtype=object)
    groups = [np.flatnonzero(names == d) for d in sorted(set(names))]
    min_pools = min(spec.diversification.min_pools, max(int(cand.spot[g].sum()) for g in groups))
    limits = limits_for(spec, cand.weighted[cand.spot], quotas)
    best, elapsed = None, 0.0
    for g in groups:
        sub = cand.subset(g)
        model = milp.Model(
            sub,
            float(spec.capacity.gpus),
            float(spec.capacity.on_demand_gpus),
            spec.budget.max_per_hour,
            min_pools,
            reduce=False,
            time_limit=limit,
            limits=limits,
        )
        t = time.perf_counter()
        out = strategies.solve(spec.strategy, model, spec.workload, replan=False)
        elapsed += time.perf_counter() - t
        if out.notes:
            return None, elapsed  # not proven within the limit
        if out.counts is None:
            continue  # this domain cannot meet the spec
        if spec.strategy is Strategy.LOWEST_PRICE:
            value = float(sub.price @ out.counts)
        else:
            value = economics.fleet_true_cost_per_hour(
                ((int(n), float(p), float(r)) for n, p, r in zip(out.counts, sub.price, sub.rate) if n), spec.workload
            )
        best = value if best is None else min(best, value)
    return best, elapsed


def speed(
    runs: int,
    limit: float,
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000),
    cases: list[tuple[str, str, str | None]] = CASES,
    reference_limit: int = 20_000,
    spread_limit: int = 20_000,
    variants: tuple[str, ...] = tuple(VARIANTS),
) -> list[dict]:
    """``reference_limit``: the plain MILP runs on catalogs of at most this many allowed pools
    (coupled jobs spread over every region: a tenth of it; they walk many MILPs).
    ``spread_limit``: coupled jobs spread over every region are planned on catalogs of at most
    this many offers."""
    catalogs = [("snapshot", list(snapshot_offers()))] + [
        (f"synthetic-{n // 1000}k", synthetic_offers(n)) for n in sizes
    ]
    rows = []
    for name, offers in catalogs:
        for variant, (strategy, kind, placed) in ((v, c) for v in variants for c in cases):
            spec = bench_spec(variant, strategy, kind, placed)
            if kind == "coupled" and spec.placement_level == "any" and len(offers) > spread_limit:
                continue  # minutes per plan (100k: 108 s and 355 s in planner-100k-partial.log)
            quotas = bench_quotas(variant)
            n = runs if len(offers) < 50_000 or (strategy, kind) == CASES[0][:2] else max(1, runs // 2)
            cpu = time.process_time()
            seconds, p = median_time(lambda: plan(spec, offers, quotas=quotas), n)
            cpu = (time.process_time() - cpu) / n
            cand = select(spec, offers)
            limits = limits_for(spec, cand.weighted[cand.spot], quotas)
            group = Domains.bind(limits, cand).group
            row = dict(
                catalog=name,
                offers=len(offers),
                variant=variant,
                strategy=strategy,
                workload=kind,
                placement=spec.placement_level,
                runs=n,
                median_seconds=round(seconds, 4),
                mean_cpu_seconds=round(cpu, 4),
                allowed_pools=len(cand),
                after_pruning=len(
                    prune(
                        cand,
                        spec.capacity.gpus,
                        spec.diversification.min_pools,
                        group,
                        keys=dominance_keys(cand, linear_cost(spec, cand), spec.budget.max_per_hour is not None),
                        caps=pool_caps(spec, limits),
                    )
                ),
                feasible=p.feasible,
                objective=round(objective(spec, p), 4),
            )
            if p.placement is not None:
                c = p.placement
                row.update(
                    domain=c.domain,
                    domains=c.domains,
                    domains_solved=c.solved,
                    runner_up_ratio=(
                        None
                        if c.runner_up_objective is None or not c.objective
                        else round(c.runner_up_objective / c.objective, 4)
                    ),
                )
            spread = kind == "coupled" and spec.placement_level == "any"
            small_enough = len(cand) <= (reference_limit // 10 if spread else reference_limit)
            if strategy in ("price-capacity-optimized", "lowest-price") and small_enough:
                ref, ref_seconds = independent_solve(spec, offers, limit, quotas)
                row["independent_seconds"] = round(ref_seconds, 3)
                row["speedup_vs_independent"] = round(ref_seconds / seconds, 2) if seconds > 0 else None
                row["gap_vs_independent"] = None if ref is None else objective(spec, p) / ref - 1
            rows.append(row)
            print(
                f"{name:>15} {variant:>14} {strategy:>25} {kind:>11} {spec.placement_level:>8}  {seconds:7.3f} s "
                f"(cpu {cpu:6.3f})  "
                f"pools {len(cand):>6} -> {row['after_pruning']:>5}  "
                f"domains {row.get('domains_solved', '-')}/{row.get('domains', '-')}  "
                f"plain MILP x{row.get('speedup_vs_independent', '-')}  gap {row.get('gap_vs_independent', '-')}",
                flush=True,
            )
    return rows


def placed(spec: FleetSpec, level: str | None) -> FleetSpec:
    """``spec`` under ``placement: level`` with the caps that cannot hold there (at the level or
    coarser) turned off."""
    effective = level or ("region" if spec.workload.kind.value == "coupled" else "any")
    off = (
        {}
        if effective == "any"
        else {f"max_{lv}_share": 1.0 for lv in PLACEMENT_LEVELS[PLACEMENT_LEVELS.index(effective) :]}
    )
    return spec.model_copy(
        update={
            "placement": Placement(level) if level else None,
            "diversification": spec.diversification.model_copy(update=off),
        }
    )


def exhaustive(count: int) -> dict:
    """Random small instances (<= 4 pools, <= 8 GPUs, a random placement level): our objective
    vs exhaustive search."""
    rng = random.Random(1)
    worst, checked, infeasible_agree = 0.0, 0, 0
    for _ in range(count):
        offers = [
            offer(
                provider=rng.choice(["aws", "gcp"]),
                region=rng.choice(["r1", "r2"]),
                zone=rng.choice(["za", "zb"]),
                itype=f"t{i}",
                spot=rng.random() < 0.7,
                gpus=rng.choice([1, 2, 4, 8]),
                acc=rng.choice(["H100", "A100-80GB"]),
                price=round(rng.uniform(0.5, 20), 2),
                rate=round(rng.uniform(0, 1.5), 3),
                hint=rng.choice([None, None, 2, 4]),
            )
            for i in range(rng.randint(1, 4))
        ]
        target = rng.randint(1, 8)
        strategy = rng.choice(["price-capacity-optimized", "lowest-price"])
        spec = parse_spec(
            f"name: small\ncapacity: {{gpus: {target}, accelerators: {{H100: 1.0, A100-80GB: 0.6}}, "
            f"on_demand_gpus: {rng.randint(0, target) if rng.random() < 0.4 else 0}}}\n"
            f"strategy: {strategy}\nworkload: {{kind: {rng.choice(['independent', 'coupled'])}}}\n"
            "placement: any\n"
            f"diversification: {{max_pool_share: {rng.choice([0.25, 0.5, 1.0])}, "
            f"min_pools: {rng.randint(1, 3)}, max_zone_share: {rng.choice([0.34, 0.5, 1])}, "
            f"max_region_share: {rng.choice([0.5, 0.75, 1])}, "
            f"max_provider_share: {rng.choice([0.5, 1])}}}\n"
            + (f"budget: {{max_per_hour: {rng.randint(5, 60)}}}\n" if rng.random() < 0.3 else "")
        )
        spec = placed(spec, rng.choice([None, "zone", "region", "provider", "any"]))
        quotas = (
            [
                Quota(
                    provider="aws",
                    region=rng.choice(["", "r1"]),
                    market=rng.choice([None, Market.SPOT]),
                    limit=rng.randint(0, 8),
                )
            ]
            if rng.random() < 0.5
            else []
        )
        _, best = brute_force(spec, offers, quotas=quotas)
        try:
            p = plan(spec, offers, quotas=quotas)
        except PlanError:  # no offer passes the rules: nothing to compare
            infeasible_agree += best is None
            continue
        if best is None:
            infeasible_agree += not p.feasible
            continue
        checked += 1
        worst = max(worst, objective(spec, p) / best.key[0] - 1)
    return dict(instances=count, feasible_compared=checked, infeasible_agreed=infeasible_agree, max_relative_gap=worst)


def naive_fleets(spec: FleetSpec, cand) -> dict[str, np.ndarray | None]:
    """Counts per pool of the naive fleets (``None``: cannot meet the target)."""
    target, base = float(spec.capacity.gpus), float(spec.capacity.on_demand_gpus)
    w, price = cand.weighted, cand.price
    free = np.where(np.isinf(cand.hint), 10**9, cand.hint)
    capped = np.where(np.isinf(cand.upper), 10**9, cand.upper)

    def greedy(pools: np.ndarray, need: float, counts: np.ndarray, bound: np.ndarray) -> float:
        for i in pools[np.argsort(price[pools] / w[pools], kind="stable")]:
            if need <= 1e-9:
                break
            take = int(min(bound[i] - counts[i], math.ceil(need / w[i] - 1e-9)))
            counts[i] += take
            need -= take * w[i]
        return need

    out: dict[str, np.ndarray | None] = {}
    od, every = np.flatnonzero(~cand.spot), np.arange(len(cand))
    counts = np.zeros(len(cand), np.int64)
    out["all on-demand"] = counts if greedy(od, target, counts, free) <= 1e-9 else None
    for name, bound in (("cheapest-first greedy", free), ("greedy within the spec's caps", capped)):
        counts = np.zeros(len(cand), np.int64)
        left = greedy(od, base, counts, bound)
        left += greedy(every, target - float(w @ counts), counts, bound)
        out[name] = counts if left <= 1e-9 else None
    singles = [
        np.where(every == i, math.ceil(target / w[i] - 1e-9), 0)
        for i in every
        if math.ceil(target / w[i] - 1e-9) <= free[i]
    ]
    out["cheapest single pool"] = min(
        singles, key=lambda c: describe(spec, cand, c)["true_per_weighted_gpu_h"], default=None
    )
    return out


def describe(spec: FleetSpec, cand, counts: np.ndarray) -> dict:
    """True cost per weighted GPU-hour, $/h, interruptions/day and the largest share of the
    spot capacity one pool holds (what a single reclaim can take)."""
    used = np.flatnonzero(counts)
    groups = [(int(counts[i]), float(cand.price[i]), float(cand.rate[i])) for i in used]
    spot_w = cand.weighted * counts * cand.spot
    true = economics.fleet_true_cost_per_hour(groups, spec.workload)
    return {
        "true_per_weighted_gpu_h": round(true / float(cand.weighted @ counts), 4),
        "true_cost_per_hour": round(true, 2),
        "weighted_gpus": round(float(cand.weighted @ counts), 2),
        "price_per_hour": round(float(cand.price @ counts), 2),
        "interruptions_per_day": round(24 * float(cand.rate @ counts), 2),
        "largest_spot_pool_share": round(float(spot_w.max() / spot_w.sum()), 3) if spot_w.sum() else 0.0,
        **{
            f"largest_spot_{level}_share": largest_domain_share(cand, spot_w, level)
            for level in ("zone", "region", "provider")
        },
        "pools": len(used),
    }


def largest_domain_share(cand, spot_w: np.ndarray, level: str) -> float:
    """Share of the spot weighted GPUs held by the fullest domain of ``level``."""
    if not spot_w.sum():
        return 0.0
    names = np.array([domain_name(o, level) for o in cand.offers], dtype=object)
    _, inverse = np.unique(names, return_inverse=True)
    return round(float(np.bincount(inverse.reshape(-1), weights=spot_w).max() / spot_w.sum()), 3)


def quality() -> list[dict]:
    rows = []
    for name in EXAMPLES:
        spec = load_spec(ROOT / "examples" / f"{name}.yaml")
        offers = filter_for_spec(snapshot_offers(), spec)
        cand = select(spec.model_copy(update={"budget": spec.budget.model_copy(update={"max_per_hour": None})}), offers)
        index = {o.pool.id: i for i, o in enumerate(cand.offers)}
        fleets: dict[str, np.ndarray | None] = {}
        strategies_run = [spec.strategy] + (
            [Strategy.PRICE_CAPACITY_OPTIMIZED] if spec.strategy is not Strategy.PRICE_CAPACITY_OPTIMIZED else []
        )
        for strategy in strategies_run:
            p = plan(spec.model_copy(update={"strategy": strategy}), offers)
            counts = np.zeros(len(cand), np.int64)
            for pool, n in p.counts().items():
                counts[index[pool]] = n
            fleets[f"spotfleet ({strategy.value})"] = counts
            if strategy is spec.strategy:
                baseline = {
                    "strategy": strategy.value,
                    "on_demand_alternative_per_hour": p.totals.on_demand_alternative_per_hour,
                    "savings_fraction": p.totals.savings_fraction,
                }
        before = spec.model_copy(
            update={"diversification": spec.diversification.model_copy(update={"max_zone_share": 1.0})}
        )
        p = plan(before, offers)
        counts = np.zeros(len(cand), np.int64)
        for pool, n in p.counts().items():
            counts[index[pool]] = n
        fleets[f"spotfleet ({spec.strategy.value}, no zone cap)"] = counts
        capped = spec.model_copy(
            update={
                "diversification": spec.diversification.model_copy(
                    update={"max_zone_share": 0.25, "max_region_share": 0.5, "max_provider_share": 0.5}
                )
            }
        )
        p = plan(capped, offers)
        counts = np.zeros(len(cand), np.int64)
        for pool, n in p.counts().items():
            counts[index[pool]] = n
        fleets[f"spotfleet ({spec.strategy.value}, zone/region/provider <= 0.25/0.5/0.5)"] = counts
        fleets.update(naive_fleets(spec, cand))
        row = {
            "spec": name,
            "workload": spec.workload.kind.value,
            "plan": baseline,
            "fleets": {k: None if c is None else describe(spec, cand, c) for k, c in fleets.items()},
        }
        rows.append(row)
        print(f"  {name} ({row['workload']} workload)")
        for k, d in row["fleets"].items():
            print(
                f"    {k:>40}: "
                + (
                    "cannot meet the target"
                    if d is None
                    else f"${d['true_per_weighted_gpu_h']:.3f}/weighted GPU-h (${d['true_cost_per_hour']:.2f}/h true "
                    f"for {d['weighted_gpus']:g}), "
                    f"{d['interruptions_per_day']:.1f} interruptions/day, one reclaim takes <= "
                    f"{d['largest_spot_pool_share']:.0%} of spot, {d['pools']} pools; largest zone/region/provider "
                    f"{d['largest_spot_zone_share']:.0%}/{d['largest_spot_region_share']:.0%}/"
                    f"{d['largest_spot_provider_share']:.0%}"
                ),
                flush=True,
            )
    return rows


def machine() -> dict:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--small", type=int, default=200, help="random small instances for exhaustive search")
    ap.add_argument("--independent-limit", type=float, default=120.0, help="seconds for the plain MILP")
    ap.add_argument(
        "--quality-only",
        action="store_true",
        help="rerun only the example plans' quality and keep the other saved figures",
    )
    ap.add_argument("--sizes", default="1000,10000,100000", help="synthetic catalog sizes (pools)")
    ap.add_argument(
        "--reference-limit",
        type=int,
        default=20_000,
        help="largest catalog (allowed pools) the plain MILP reference runs on",
    )
    ap.add_argument(
        "--coupled-only",
        action="store_true",
        help=f"time only coupled plans; save to {COUPLED_RESULTS.relative_to(ROOT)}",
    )
    ap.add_argument(
        "--speed-only", action="store_true", help=f"time only the speed rows; save to {SPEED_RESULTS.relative_to(ROOT)}"
    )
    ap.add_argument("--cases", default="", help="with --speed-only: indices into CASES (default: all)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="with --speed-only: variants to time")
    args = ap.parse_args()
    sizes = tuple(int(x) for x in args.sizes.split(",") if x)
    if args.speed_only:
        cases = [CASES[int(i)] for i in args.cases.split(",") if i] or CASES
        variants = tuple(v for v in args.variants.split(",") if v)
        print("speed (median wall seconds, mean CPU seconds) and exactness vs the plain MILP")
        rows = speed(args.runs, args.independent_limit, sizes, cases, args.reference_limit, variants=variants)
        SPEED_RESULTS.write_text(
            json.dumps({"machine": machine(), "load_average_1m": round(os.getloadavg()[0], 1), "speed": rows}, indent=2)
            + "\n"
        )
        print(f"saved {SPEED_RESULTS.relative_to(ROOT)}")
        return
    if args.coupled_only:
        print("coupled plans: speed (median wall seconds) and exactness vs the plain MILP")
        rows = speed(
            args.runs, args.independent_limit, sizes, [c for c in CASES if c[1] == "coupled"], args.reference_limit
        )
        COUPLED_RESULTS.parent.mkdir(parents=True, exist_ok=True)
        COUPLED_RESULTS.write_text(json.dumps({"machine": machine(), "speed": rows}, indent=2) + "\n")
        print(f"saved {COUPLED_RESULTS.relative_to(ROOT)}")
        return
    if args.quality_only:
        saved = json.loads(RESULTS.read_text())
        print("plan quality: expected true cost per weighted GPU-hour (examples, snapshot)")
        saved["quality"] = quality()
        RESULTS.write_text(json.dumps(saved, indent=2) + "\n")
        print(f"saved {RESULTS.relative_to(ROOT)}")
        return
    print("speed (median wall seconds) and exactness vs the plain MILP")
    rows = speed(args.runs, args.independent_limit, sizes, CASES, args.reference_limit)
    print("exhaustive search on small instances")
    small = exhaustive(args.small)
    print(f"  {small}")
    print("plan quality: expected true cost per weighted GPU-hour (examples, snapshot)")
    examples = quality()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "machine": machine(),
                "target": "default strategy, 100k pools, under 1 s",
                "speed": rows,
                "exhaustive": small,
                "quality": examples,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
