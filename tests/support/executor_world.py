"""A hand-made plan over the executor tests' pools (``make_plan``) and what runs per pool
(``alive``); the pools, local cloud, providers and store are fixtures in tests/unit/conftest.py."""

from __future__ import annotations

from fleet.model import Allocation, Offer, Plan, PlanTotals
from providers.local import LocalCloud


def make_plan(offers: list[Offer], counts: list[int], fleet: str = "demo") -> Plan:
    allocs = tuple(
        Allocation(offer=o, count=n, weighted_gpus=float(n * o.gpus), true_cost_per_hour=n * o.price_per_hour)
        for o, n in zip(offers, counts)
    )
    gpus = sum(a.count * a.offer.gpus for a in allocs)
    totals = PlanTotals(
        gpus=gpus,
        weighted_gpus=gpus,
        target_weighted_gpus=gpus,
        on_demand_weighted_gpus=0,
        price_per_hour=sum(a.true_cost_per_hour for a in allocs),
        true_cost_per_hour=sum(a.true_cost_per_hour for a in allocs),
        true_cost_per_weighted_gpu_hour=1.0,
        expected_interruptions_per_day=0.0,
    )
    return Plan(fleet=fleet, spec_hash="test", strategy="hand", allocations=allocs, totals=totals)


def alive(cloud: LocalCloud, fleet: str = "demo") -> dict[str, int]:
    out: dict[str, int] = {}
    for inst in cloud.all_instances(alive_only=True):
        if inst.fleet == fleet:
            out[inst.pool.id] = out.get(inst.pool.id, 0) + 1
    return out
