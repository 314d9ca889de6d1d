"""Cost accrual from instance records (pure: no I/O, no clock; the caller passes ``now``).

An instance costs ``price_per_hour`` from ``launched_at`` until ``ended_at`` (or ``now``
while alive), on its provider's clock. Savings compare the same instance-hours at the
on-demand price of the same instance type, counted only where that price is known;
``covered_fraction`` says how much of the cost the comparison covers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass

from fleet.model import Market
from fleet.state.records import EventKind, InstanceRecord

#: ``now`` for every provider, per provider name, or a function of the provider name.
Clock = float | Mapping[str, float] | Callable[[str], float]


@dataclass(frozen=True)
class CostSummary:
    """Cost so far and current rate of one fleet (USD, hours)."""

    cost_so_far: float
    spot_cost: float
    on_demand_cost: float
    rate_per_hour: float
    spot_rate_per_hour: float
    on_demand_rate_per_hour: float
    running: int
    running_gpus: int
    instance_hours: float
    gpu_hours: float
    interruptions: int
    on_demand_equivalent: float | None  # the covered instance-hours at on-demand prices
    savings: float | None  # on_demand_equivalent minus what they cost
    savings_fraction: float | None
    covered_fraction: float  # share of cost_so_far with a known on-demand price

    def to_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def now_of(clock: Clock, provider: str) -> float:
    if isinstance(clock, (int, float)):
        return float(clock)
    if callable(clock):
        return clock(provider)
    return clock[provider]


def hours_run(record: InstanceRecord, now: float) -> float:
    """Hours ``record`` has run (or ran), never negative."""
    end = record.ended_at if record.ended_at is not None else now
    return max(0.0, end - record.launched_at) / 3600.0


def summarize(records: Iterable[InstanceRecord], now: Clock) -> CostSummary:
    """Accrued cost, current $/h, savings against on-demand and interruptions of ``records``."""
    spot_cost = od_cost = spot_rate = od_rate = inst_h = gpu_h = 0.0
    covered_cost = od_equiv = 0.0
    running = running_gpus = interruptions = 0
    any_covered = False
    for r in records:
        hours = hours_run(r, now_of(now, r.provider))
        cost = r.price_per_hour * hours
        spot = r.market == Market.SPOT.value
        if spot:
            spot_cost += cost
        else:
            od_cost += cost
        inst_h += hours
        gpu_h += hours * r.gpus
        if r.alive:
            running += 1
            running_gpus += r.gpus
            if spot:
                spot_rate += r.price_per_hour
            else:
                od_rate += r.price_per_hour
        elif r.end_reason == EventKind.PREEMPTED:
            interruptions += 1
        reference = r.price_per_hour if not spot else r.on_demand_price
        if reference is not None:
            any_covered = True
            covered_cost += cost
            od_equiv += reference * hours
    total = spot_cost + od_cost
    savings = od_equiv - covered_cost if any_covered else None
    return CostSummary(
        cost_so_far=total,
        spot_cost=spot_cost,
        on_demand_cost=od_cost,
        rate_per_hour=spot_rate + od_rate,
        spot_rate_per_hour=spot_rate,
        on_demand_rate_per_hour=od_rate,
        running=running,
        running_gpus=running_gpus,
        instance_hours=inst_h,
        gpu_hours=gpu_h,
        interruptions=interruptions,
        on_demand_equivalent=od_equiv if any_covered else None,
        savings=savings,
        savings_fraction=(savings / od_equiv) if savings is not None and od_equiv > 0 else None,
        covered_fraction=(covered_cost / total) if total > 0 else (1.0 if any_covered else 0.0),
    )


def by_pool(records: Iterable[InstanceRecord], now: Clock) -> dict[str, CostSummary]:
    """``summarize`` per pool id, for the status table."""
    groups: dict[str, list[InstanceRecord]] = {}
    for r in records:
        groups.setdefault(r.pool, []).append(r)
    return {pool: summarize(rs, now) for pool, rs in sorted(groups.items())}
