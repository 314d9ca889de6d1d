"""Hand-made markets for the simulator tests: a few 1-GPU H100 pools on made-up zones."""

from __future__ import annotations

from fleet.model import InterruptionSource, Market, Offer, PoolKey
from fleet.simulate.tracefile import ValueMeaning, ZoneTrace, parse_trace
from fleet.spec import FleetSpec, parse_spec

GAP = 600


def spot(zone: str, price: float, rate: float = 0.2) -> Offer:
    return Offer(
        pool=PoolKey(provider="gcp", region="r1", zone=zone, instance_type="a3-highgpu-1g", market=Market.SPOT),
        accelerator="H100",
        gpus=1,
        price_per_hour=price,
        on_demand_price=10.0,
        interruptions_per_hour=rate,
        interruption_source=InterruptionSource.TRACE,
    )


def on_demand(price: float = 10.0) -> Offer:
    return Offer(
        pool=PoolKey(provider="gcp", region="r1", zone="", instance_type="a3-highgpu-1g", market=Market.ON_DEMAND),
        accelerator="H100",
        gpus=1,
        price_per_hour=price,
        on_demand_price=price,
    )


def trace(zone: str, data: list[int], meaning: ValueMeaning = ValueMeaning.ZERO) -> ZoneTrace:
    return parse_trace({"metadata": {"gap_seconds": GAP, "zone": zone}, "data": data}, zone, meaning)


def fleet_spec(gpus: int, extra: str = "") -> FleetSpec:
    return parse_spec(f"""
name: sim
capacity: {{gpus: {gpus}, accelerators: [H100], gpus_per_node: {{min: 1, max: 1}}}}
providers: {{gcp: {{}}}}
{extra}
""")


def dollars(price: float, node_ticks: int) -> float:
    return price * node_ticks * GAP / 3600
