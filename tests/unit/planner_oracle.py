"""Brute-force reference for the planner tests: enumerate every count vector of a small
instance and keep the best. Written from the spec's rules directly, sharing nothing with
fleet.candidates / fleet.milp, so it checks them independently."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from fleet import economics
from fleet.model import Market, Offer, PoolKey
from fleet.spec import FleetSpec, Strategy

EPS = 1e-6


def offer(provider: str = "aws", region: str = "r1", zone: str = "z1", itype: str = "t", *, spot: bool = True,
          acc: str = "H100", gpus: int = 1, price: float = 1.0, rate: float = 0.1, hint: int | None = None) -> Offer:
    """A hand-built offer; on-demand offers get rate 0."""
    market = Market.SPOT if spot else Market.ON_DEMAND
    return Offer(pool=PoolKey(provider=provider, region=region, zone=zone, instance_type=itype, market=market),
                 accelerator=acc, gpus=gpus, price_per_hour=price, interruptions_per_hour=rate if spot else 0.0,
                 capacity_hint=hint)


def allowed(spec: FleetSpec, o: Offer, blocked: tuple[str, ...] = ()) -> bool:
    """Every placement and price rule of the spec, written out plainly."""
    if o.accelerator not in spec.capacity.accelerators:
        return False
    if not spec.capacity.gpus_per_node.min <= o.gpus <= spec.capacity.gpus_per_node.max:
        return False
    settings = spec.provider_settings(o.pool.provider)
    if settings is None or not settings.allows(o.pool.region, o.pool.zone):
        return False
    if o.pool.market is Market.SPOT and not settings.spot or o.pool.market is Market.ON_DEMAND and not settings.on_demand:
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


def cap(spec: FleetSpec, o: Offer) -> float:
    """Upper bound on instances in a pool: capacity hint, and for spot the pool share."""
    bound = math.inf if o.capacity_hint is None else o.capacity_hint
    if o.pool.market is Market.SPOT:
        part = spec.diversification.max_pool_share * (spec.capacity.gpus - spec.capacity.on_demand_gpus)
        bound = min(bound, max(1, math.floor(part / weighted(spec, o) + 1e-9)))
    return bound


def feasible(spec: FleetSpec, offers: list[Offer], counts: tuple[int, ...], min_pools: int) -> bool:
    w = sum(weighted(spec, o) * n for o, n in zip(offers, counts))
    od = sum(weighted(spec, o) * n for o, n in zip(offers, counts) if o.pool.market is Market.ON_DEMAND)
    price = sum(o.price_per_hour * n for o, n in zip(offers, counts))
    spot_pools = sum(1 for o, n in zip(offers, counts) if n and o.pool.market is Market.SPOT)
    if w < spec.capacity.gpus - EPS or od < spec.capacity.on_demand_gpus - EPS:
        return False
    if spec.budget.max_per_hour is not None and price > spec.budget.max_per_hour + EPS:
        return False
    if any(n > cap(spec, o) for o, n in zip(offers, counts)):
        return False
    return not (0 < spot_pools < min_pools)


def true_cost(spec: FleetSpec, offers: list[Offer], counts: tuple[int, ...]) -> float:
    return economics.fleet_true_cost_per_hour(
        ((n, o.price_per_hour, o.interruptions_per_hour) for o, n in zip(offers, counts)), spec.workload)


@dataclass
class Best:
    counts: tuple[int, ...]
    key: tuple[float, ...]


def objective_key(spec: FleetSpec, offers: list[Offer], counts: tuple[int, ...],
                  od_cap: float | None = None) -> tuple[float, ...]:
    """The strategy's objective as a lexicographic key (smaller is better)."""
    price = sum(o.price_per_hour * n for o, n in zip(offers, counts))
    rate = sum(o.interruptions_per_hour * n for o, n in zip(offers, counts))
    if spec.strategy is Strategy.LOWEST_PRICE:
        return (round(price, 6),)
    if spec.strategy is Strategy.PRICE_CAPACITY_OPTIMIZED:
        return (round(true_cost(spec, offers, counts), 6),)
    if spec.strategy is Strategy.CAPACITY_OPTIMIZED:
        return (round(rate, 6), round(price, 6))
    largest = max((weighted(spec, o) * n for o, n in zip(offers, counts) if o.pool.market is Market.SPOT), default=0)
    return (round(largest, 6), round(price, 6))


def brute_force(spec: FleetSpec, offers: list[Offer], blocked: tuple[str, ...] = (),
                od_cap: float | None = None) -> tuple[list[Offer], Best | None]:
    """The allowed offers and the best count vector (``None``: infeasible). ``od_cap`` limits
    on-demand weighted GPUs (the market split of capacity-optimized / diversified)."""
    pools = sorted((o for o in offers if allowed(spec, o, blocked)), key=lambda o: o.pool.id)
    spot_pools = sum(1 for o in pools if o.pool.market is Market.SPOT)
    min_pools = min(spec.diversification.min_pools, spot_pools)
    ranges = [range(int(min(cap(spec, o), math.floor(spec.capacity.gpus / weighted(spec, o) + 1e-9) + 1)) + 1)
              for o in pools]
    best: Best | None = None
    for counts in itertools.product(*ranges):
        if not feasible(spec, pools, counts, min_pools):
            continue
        if od_cap is not None and sum(weighted(spec, o) * n for o, n in zip(pools, counts)
                                      if o.pool.market is Market.ON_DEMAND) > od_cap + EPS:
            continue
        key = objective_key(spec, pools, counts)
        if best is None or key < best.key:
            best = Best(counts, key)
    return pools, best
