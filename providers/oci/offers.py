"""OCI offers: the GPU shapes each availability domain can launch now, at Oracle's list prices.

OCI has no price API in its SDK, and its prices are the same in every commercial region, so the
price of a shape comes from the shipped snapshot (``fleet/data/catalog``, Oracle's list prices;
preemptible at half, VM shapes only). What is live is where: ``ListShapes`` per availability
domain says which shapes this compartment can launch in which AD (a shape missing from an AD,
or beyond the tenancy's service limits, is not offered there). Availability domains are the
zones of a pool (``oci/us-ashburn-1/Uocm:US-ASHBURN-AD-1/BM.GPU.H100.8/on-demand``).

A shape the snapshot does not price is left out (the planner cannot weigh it).
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.catalog import snapshot_offers, spot_interruption_estimate
from fleet.model import Market, Offer, PoolKey


@dataclass(frozen=True)
class ShapePrice:
    """One shape's list prices and size, as the snapshot has it."""

    shape: str
    accelerator: str
    gpus: int
    vcpus: float | None
    memory_gib: float | None
    on_demand: float
    preemptible: float | None


def shape_prices() -> dict[str, ShapePrice]:
    """Shape name -> its list prices (one price for every region: the first region's row)."""
    out: dict[str, ShapePrice] = {}
    spot: dict[str, float] = {}
    for offer in snapshot_offers():
        if offer.pool.provider != "oci":
            continue
        if offer.market is Market.SPOT:
            spot.setdefault(offer.pool.instance_type, offer.price_per_hour)
        elif offer.pool.instance_type not in out:
            out[offer.pool.instance_type] = ShapePrice(
                offer.pool.instance_type,
                offer.accelerator,
                offer.gpus,
                offer.vcpus,
                offer.memory_gib,
                offer.price_per_hour,
                None,
            )
    return {name: ShapePrice(**{**p.__dict__, "preemptible": spot.get(name)}) for name, p in out.items()}


def preemptible_allowed(shape: str) -> bool:
    """Whether OCI takes a preemptible launch of ``shape`` (bare metal shapes do not)."""
    return not shape.startswith("BM.")


def offers_for(
    region: str, zone: str, shape: str, prices: dict[str, ShapePrice], *, spot: bool, on_demand: bool
) -> list[Offer]:
    """The offers of ``shape`` in availability domain ``zone`` ([] when the snapshot has no price)."""
    price = prices.get(shape)
    if price is None:
        return []
    common = dict(
        accelerator=price.accelerator,
        gpus=price.gpus,
        vcpus=price.vcpus,
        memory_gib=price.memory_gib,
        on_demand_price=price.on_demand,
        source="live",
    )
    out = []
    if on_demand:
        out.append(
            Offer(
                pool=PoolKey(provider="oci", region=region, zone=zone, instance_type=shape, market=Market.ON_DEMAND),
                price_per_hour=price.on_demand,
                **common,
            )
        )
    if spot and price.preemptible is not None and preemptible_allowed(shape):
        rate, source = spot_interruption_estimate("oci", zone, price.accelerator)
        out.append(
            Offer(
                pool=PoolKey(provider="oci", region=region, zone=zone, instance_type=shape, market=Market.SPOT),
                price_per_hour=price.preemptible,
                interruptions_per_hour=rate,
                interruption_source=source,
                **common,
            )
        )
    return out
