"""Brute-force reference for the planner tests: enumerate every count vector of a small
instance and keep the best. Written from the spec's rules directly, sharing nothing with
fleet.planning.candidates / fleet.planning.milp, so it checks them independently."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np

from fleet.model import Market, Offer, PoolKey
from fleet.planning import economics
from fleet.spec import FleetSpec, Strategy, WorkloadKind

EPS = 1e-6


def offer(
    provider: str = "aws",
    region: str = "r1",
    zone: str = "z1",
    itype: str = "t",
    *,
    spot: bool = True,
    acc: str = "H100",
    gpus: int = 1,
    price: float = 1.0,
    rate: float = 0.1,
    hint: int | None = None,
) -> Offer:
    """A hand-built offer; on-demand offers get rate 0."""
    market = Market.SPOT if spot else Market.ON_DEMAND
    return Offer(
        pool=PoolKey(provider=provider, region=region, zone=zone, instance_type=itype, market=market),
        accelerator=acc,
        gpus=gpus,
        price_per_hour=price,
        interruptions_per_hour=rate if spot else 0.0,
        capacity_hint=hint,
    )


def random_offers(
    rng: random.Random,
    n: int,
    *,
    regions: int = 6,
    zones: int = 2,
    gpus: tuple[int, ...] = (4, 8),
    spot_discount: float = 0.5,
    max_rate: float = 0.8,
) -> list[Offer]:
    """``n`` offers over aws and gcp x ``regions`` x ``zones`` per region, 70% spot (priced at
    ``spot_discount`` of a 1.2x on-demand list), H100 or A100-80GB, rates up to ``max_rate``."""
    out = []
    for i in range(n):
        provider, region = rng.choice(["aws", "gcp"]), f"r{rng.randrange(regions)}"
        spot = rng.random() < 0.7
        size = rng.choice(list(gpus))
        out.append(
            offer(
                provider=provider,
                region=region,
                zone=f"{region}-{rng.randrange(zones)}",
                itype=f"t{i}",
                spot=spot,
                gpus=size,
                acc=rng.choice(["H100", "A100-80GB"]),
                price=round(size * rng.uniform(1.0, 4.0) * (spot_discount if spot else 1.2), 2),
                rate=round(rng.uniform(0.02, max_rate), 3),
                hint=rng.choice([None, 1, 2, 4]),
            )
        )
    return out


def allowed(spec: FleetSpec, o: Offer, blocked: tuple[str, ...] = ()) -> bool:
    """Every placement and price rule of the spec, written out plainly."""
    if o.accelerator not in spec.capacity.accelerators:
        return False
    if not spec.capacity.gpus_per_node.min <= o.gpus <= spec.capacity.gpus_per_node.max:
        return False
    settings = spec.provider_settings(o.pool.provider)
    if settings is None or not settings.allows(o.pool.region, o.pool.zone):
        return False
    if not (settings.spot if o.pool.market is Market.SPOT else settings.on_demand):
        return False
    pid = o.pool.id
    if any(pid == b or pid.startswith(b.rstrip("/") + "/") for b in blocked):
        return False
    if spec.budget.max_per_gpu_hour is not None and o.price_per_hour / o.gpus > spec.budget.max_per_gpu_hour:
        return False
    if spec.budget.max_per_hour is not None and o.price_per_hour > spec.budget.max_per_hour:
        return False
    return o.capacity_hint != 0


def weighted(spec: FleetSpec, o: Offer) -> float:
    return o.gpus * spec.capacity.accelerators[o.accelerator]


def share_limit(spec: FleetSpec, pools: list[Offer]) -> float:
    """Most weighted GPUs one spot pool may hold in any plan: the share of the largest spot
    part (target - baseline), or the smallest spot node allowed if that is bigger
    (``within_caps`` applies the exact rule)."""
    part = spec.diversification.max_pool_share * (spec.capacity.gpus - spec.capacity.on_demand_gpus)
    nodes = [weighted(spec, o) for o in pools if o.pool.market is Market.SPOT]
    return max([part] + ([min(nodes)] if nodes else []))


def cap(spec: FleetSpec, o: Offer, limit: float) -> float:
    """Upper bound on instances in a pool: capacity hint, and for spot the pool share."""
    bound = math.inf if o.capacity_hint is None else o.capacity_hint
    if o.pool.market is Market.SPOT:
        bound = min(bound, math.floor(limit / weighted(spec, o) + 1e-9))
    return bound


def fits_domain_caps(spec: FleetSpec, o: Offer, pools: list[Offer]) -> bool:
    """Whether one node of ``o`` fits every zone, region and provider cap some plan allows:
    that level's share of the spot part (target - on-demand baseline), or the smallest spot node
    on offer if that is more. A spot pool whose one node is larger can hold nothing, so it
    neither counts toward min_pools nor enters a plan."""
    if o.pool.market is not Market.SPOT:
        return True
    d = spec.diversification
    part = spec.capacity.gpus - spec.capacity.on_demand_gpus
    nodes = [weighted(spec, p) for p in pools if p.pool.market is Market.SPOT]
    smallest = min(nodes) if nodes else 0.0
    shares = (d.max_zone_share, d.max_region_share, d.max_provider_share)
    return all(weighted(spec, o) <= max(share * part, smallest) + 1e-9 for share in shares if share < 1)


def domain_of(o: Offer, level: str) -> str:
    p = o.pool
    return {
        "pool": p.id,
        "zone": f"{p.provider}/{p.region}/{p.zone or '-'}",
        "region": f"{p.provider}/{p.region}",
        "provider": p.provider,
    }[level]


def placement_of(spec: FleetSpec) -> str:
    """The level every node must share: the spec's, else region for a coupled job, else any."""
    if spec.placement is not None:
        return spec.placement.value
    return "region" if spec.workload.kind is WorkloadKind.COUPLED else "any"


def within_placement(spec: FleetSpec, pools: list[Offer], grid: np.ndarray) -> np.ndarray:
    """Rows of ``grid`` whose pools in use all lie in one domain of the spec's placement level."""
    level = placement_of(spec)
    if level == "any":
        return np.ones(len(grid), bool)
    names = [domain_of(o, level) for o in pools]
    used = [(grid[:, [k for k, n in enumerate(names) if n == name]] > 0).any(axis=1) for name in set(names)]
    return np.sum(used, axis=0) <= 1


def within_caps(
    spec: FleetSpec, pools: list[Offer], grid: np.ndarray, w: np.ndarray, spot: np.ndarray, od: np.ndarray
) -> np.ndarray:
    """Rows of ``grid`` where every spot pool, zone, region and provider holds at most its
    share of (target - on-demand planned), or the smallest spot node if that is more. Caps at
    the placement level and coarser are off (every node shares one such domain)."""
    d = spec.diversification
    nodes = [weighted(spec, o) for o in pools if o.pool.market is Market.SPOT]
    smallest = min(nodes) if nodes else 0.0
    ok = np.ones(len(grid), bool)
    levels = ("pool", "zone", "region", "provider")
    placed = placement_of(spec)
    for level in levels:
        share = getattr(d, f"max_{level}_share")
        if level != "pool" and (share >= 1 or (placed != "any" and levels.index(level) >= levels.index(placed))):
            continue
        cap = np.maximum(share * (spec.capacity.gpus - od), smallest)
        for name in {domain_of(o, level) for o, s in zip(pools, spot) if s}:
            members = np.array([s and domain_of(o, level) == name for o, s in zip(pools, spot)])
            ok &= grid[:, members] @ w[members] <= cap + EPS
    return ok


def within_quotas(pools: list[Offer], grid: np.ndarray, quotas) -> np.ndarray:
    ok = np.ones(len(grid), bool)
    for q in quotas:
        units = np.array([(q.units(o) or 0.0) if q.covers(o) else 0.0 for o in pools])
        ok &= grid @ units <= max(q.limit - q.in_use, 0.0) + EPS
    return ok


def brute_force(
    spec: FleetSpec, offers: list[Offer], blocked: tuple[str, ...] = (), od_cap: float | None = None, quotas=()
) -> tuple[list[Offer], Best | None]:
    """The allowed offers (by pool id) and the best count vector (``None``: infeasible), by
    enumerating every vector up to the caps. ``od_cap`` limits on-demand weighted GPUs (the
    market split of capacity-optimized / diversified); ``quotas`` are account limits."""
    pools = sorted((o for o in offers if allowed(spec, o, blocked)), key=lambda o: o.pool.id)
    limit = share_limit(spec, pools)
    pools = [o for o in pools if cap(spec, o, limit) > 0 and fits_domain_caps(spec, o, pools)]
    if not pools:
        return pools, None
    spot = np.array([o.pool.market is Market.SPOT for o in pools])
    w = np.array([weighted(spec, o) for o in pools])
    price = np.array([o.price_per_hour for o in pools])
    rate = np.array([o.interruptions_per_hour for o in pools])
    most = [int(min(cap(spec, o, limit), math.floor(spec.capacity.gpus / weighted(spec, o) + 1e-9) + 1)) for o in pools]
    grid = np.stack(np.meshgrid(*[np.arange(m + 1) for m in most], indexing="ij"), -1).reshape(-1, len(pools))
    covered = grid @ w
    od = grid[:, ~spot] @ w[~spot]
    cost = grid @ price
    spot_used = (grid[:, spot] > 0).sum(axis=1)
    level = placement_of(spec)
    names = [domain_of(o, level) if level != "any" else "" for o in pools]
    most_spot = max(sum(1 for n, s in zip(names, spot) if s and n == name) for name in set(names))
    min_pools = min(spec.diversification.min_pools, most_spot)
    ok = (covered >= spec.capacity.gpus - EPS) & (od >= spec.capacity.on_demand_gpus - EPS)
    if spec.budget.max_per_hour is not None:
        ok &= cost <= spec.budget.max_per_hour + EPS
    ok &= ~((spot_used > 0) & (spot_used < min_pools))
    ok &= within_caps(spec, pools, grid, w, spot, od) & within_quotas(pools, grid, quotas)
    ok &= within_placement(spec, pools, grid)
    if od_cap is not None:
        ok &= od <= od_cap + EPS
    if not ok.any():
        return pools, None
    grid, cost = grid[ok], cost[ok]
    fleet_rate = grid @ rate
    if spec.strategy is Strategy.LOWEST_PRICE:
        keys = [cost]
    elif spec.strategy is Strategy.PRICE_CAPACITY_OPTIMIZED:
        keys = [_true_costs(spec, grid, price, rate, cost, fleet_rate)]
    elif spec.strategy is Strategy.CAPACITY_OPTIMIZED:
        keys = [fleet_rate, cost]
    else:
        largest = (grid[:, spot] * w[spot]).max(axis=1) if spot.any() else np.zeros(len(grid))
        keys = [largest, cost]
    best = np.lexsort([np.round(k, 6) for k in reversed(keys)])[0]
    return pools, Best(tuple(int(x) for x in grid[best]), tuple(float(np.round(k[best], 6)) for k in keys))


def _true_costs(
    spec: FleetSpec, grid: np.ndarray, price: np.ndarray, rate: np.ndarray, cost: np.ndarray, fleet_rate: np.ndarray
) -> np.ndarray:
    factor = np.vectorize(lambda r: economics.overhead_factor(float(r), spec.workload))
    if spec.workload.kind is WorkloadKind.COUPLED:
        rates, inverse = np.unique(fleet_rate, return_inverse=True)
        return cost * factor(rates)[inverse]
    return grid @ (price * factor(rate))


def true_cost(spec: FleetSpec, offers: list[Offer], counts: tuple[int, ...]) -> float:
    return economics.fleet_true_cost_per_hour(
        ((n, o.price_per_hour, o.interruptions_per_hour) for o, n in zip(offers, counts)), spec.workload
    )


@dataclass
class Best:
    counts: tuple[int, ...]
    key: tuple[float, ...]
