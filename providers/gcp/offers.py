"""GPU offers on Compute Engine: which shapes each zone has (live), priced from the snapshot.

Shapes come from two aggregated lists of the project: ``machineTypes`` (a2/a3/g2 types carry
their GPUs in ``accelerators[]``) and ``acceleratorTypes`` (the attachable GPUs of each zone:
T4, V100, P100, P4 go on an n1 host through ``guestAccelerators``). An n1 shape is named
``<host>+<accelerator type>x<count>``, for example ``n1-standard-8+nvidia-tesla-t4x1``;
:func:`parse_instance_type` reads it back for the launch.

Prices come from the Cloud Billing Catalog (:mod:`.pricing`: vCPUs, RAM and GPUs priced per
region and market, cached on disk) and, where it gives none or cannot be read, from the catalog
snapshot shipped with spotfleet (``fleet.catalog``, public list prices read on ``SNAPSHOT_DATE``):
the zone's row, else the cheapest row of the region; an n1 shape adds the snapshot's GPU rows to
the n1 host list price below. A shape with no price is left out. ``Offer.source`` names where
each price came from (``gce-api+billing`` or ``gce-api+snapshot-<date>``).

``Offer.capacity_hint`` is the region's GPU quota still free (``regions.list``:
``NVIDIA_T4_GPUS``, ``PREEMPTIBLE_NVIDIA_T4_GPUS``...) in VMs of the shape: an upper bound per
pool, shared by the region's pools, so the planner never plans a pool beyond what the project may
launch there. Spot VMs use the preemptible quota where the project has one, else the standard one.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from fleet.catalog import SNAPSHOT_DATE, snapshot_offers, spot_interruption_estimate
from fleet.model import Market, Offer, PoolKey
from providers.base import OfferQuery
from providers.gcp import pricing
from providers.gcp.pricing import PriceTable

#: GCE accelerator type -> the accelerator name spotfleet plans with.
ACCELERATORS = {
    "nvidia-tesla-t4": "T4",
    "nvidia-tesla-v100": "V100",
    "nvidia-tesla-p100": "P100",
    "nvidia-tesla-p4": "P4",
    "nvidia-tesla-a100": "A100-40GB",
    "nvidia-a100-80gb": "A100-80GB",
    "nvidia-h100-80gb": "H100",
    "nvidia-h100-mega-80gb": "H100-MEGA",
    "nvidia-h200-141gb": "H200",
    "nvidia-l4": "L4",
    "nvidia-b200": "B200",
}
#: Accelerators that attach to an n1 host (the others come only inside their machine family).
ATTACHABLE = ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4")
#: The n1 host each attachable GPU count runs on (4 vCPUs per GPU keeps every type within its limits).
N1_HOSTS = {1: "n1-standard-4", 2: "n1-standard-8", 4: "n1-standard-16", 8: "n1-standard-32"}
#: n1 list prices per vCPU-hour and GiB-hour in us-central1 (on-demand, Spot), public price list
#: read 2026-11; other regions cost up to ~30% more, so an n1 host price is an estimate.
N1_VCPU_HOUR = {Market.ON_DEMAND: 0.031611, Market.SPOT: 0.00663}
N1_GIB_HOUR = {Market.ON_DEMAND: 0.004237, Market.SPOT: 0.000889}

SOURCE = f"gce-api+snapshot-{SNAPSHOT_DATE}"  # prices from the shipped snapshot
_N1_SHAPE = re.compile(r"^(?P<host>n1-[a-z0-9-]+)\+(?P<accel>[a-z0-9-]+)x(?P<count>\d+)$")


@dataclass(frozen=True)
class Shape:
    """One launchable GPU shape in one zone."""

    zone: str
    instance_type: str  # what the pool id says
    machine_type: str  # what GCE is asked for
    accelerator_type: str  # GCE's name
    gpus: int
    attach: bool  # guestAccelerators needed (n1 hosts)
    vcpus: float | None = None
    memory_gib: float | None = None

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0]

    @property
    def accelerator(self) -> str:
        return ACCELERATORS[self.accelerator_type]


def parse_instance_type(instance_type: str) -> tuple[str, str, int]:
    """``(machine type, attachable accelerator type or "", count)`` of a pool's instance type."""
    m = _N1_SHAPE.match(instance_type)
    if m:
        return m["host"], m["accel"], int(m["count"])
    return instance_type, "", 0


def shapes(machine_types: dict[str, list[Any]], accelerator_types: dict[str, list[Any]]) -> Iterator[Shape]:
    """Every GPU shape per zone from the two aggregated lists (``zone -> rows``)."""
    for zone, rows in sorted(machine_types.items()):
        hosts = {r.name: r for r in rows}
        for r in rows:
            for acc in r.accelerators:
                if acc.guest_accelerator_type in ACCELERATORS and acc.guest_accelerator_count > 0:
                    yield Shape(
                        zone,
                        r.name,
                        r.name,
                        acc.guest_accelerator_type,
                        acc.guest_accelerator_count,
                        False,
                        float(r.guest_cpus),
                        round(r.memory_mb / 1024, 1),
                    )
        for acc in accelerator_types.get(zone, []):
            if acc.name not in ATTACHABLE:
                continue
            for count, host in N1_HOSTS.items():
                if count <= acc.maximum_cards_per_instance and host in hosts:
                    h = hosts[host]
                    yield Shape(
                        zone,
                        f"{host}+{acc.name}x{count}",
                        host,
                        acc.name,
                        count,
                        True,
                        float(h.guest_cpus),
                        round(h.memory_mb / 1024, 1),
                    )


@lru_cache(maxsize=1)
def _prices() -> tuple[dict[tuple[str, str, Market], float], dict[tuple[str, str, int, Market], float]]:
    """Snapshot prices: (zone|region, machine type, market) and (zone|region, accelerator, count, market)."""
    machines: dict[tuple[str, str, Market], float] = {}
    for o in snapshot_offers():
        if o.pool.provider == "gcp":
            for where in (o.pool.zone, o.pool.region):
                key = (where, o.pool.instance_type, o.market)
                machines[key] = min(machines.get(key, o.price_per_hour), o.price_per_hour)
    gpus: dict[tuple[str, str, int, Market], float] = {}
    text = resources.files("fleet.data").joinpath("catalog/gpu_offers.csv").read_text()
    for row in csv.DictReader(io.StringIO(text)):
        if row["provider"] != "gcp" or row["instance_type"]:
            continue
        for market, col in ((Market.ON_DEMAND, "on_demand_usd_per_hour"), (Market.SPOT, "spot_usd_per_hour")):
            if row[col]:
                price = float(row[col])
                for where in (row["zone"], row["region"]):
                    key = (where, row["accelerator"], int(row["accelerator_count"]), market)
                    gpus[key] = min(gpus.get(key, price), price)
    return machines, gpus


def live_price(shape: Shape, market: Market, table: PriceTable | None) -> float | None:
    """Hourly price of ``shape`` in ``market`` from the Billing Catalog table (None if a part is missing)."""
    if table is None or shape.vcpus is None or shape.memory_gib is None:
        return None
    return table.price(
        shape.region, market, shape.machine_type, shape.vcpus, shape.memory_gib, shape.accelerator_type, shape.gpus
    )


def price(shape: Shape, market: Market) -> float | None:
    """Hourly price of ``shape`` in ``market`` from the snapshot (zone first, then region); None if unknown."""
    machines, gpus = _prices()
    if not shape.attach:
        return machines.get(
            (shape.zone, shape.machine_type, market), machines.get((shape.region, shape.machine_type, market))
        )
    gpu = gpus.get(
        (shape.zone, shape.accelerator, shape.gpus, market),
        gpus.get((shape.region, shape.accelerator, shape.gpus, market)),
    )
    if gpu is None or shape.vcpus is None or shape.memory_gib is None:
        return None
    return round(gpu + shape.vcpus * N1_VCPU_HOUR[market] + shape.memory_gib * N1_GIB_HOUR[market], 5)


def offers_for(
    shape: Shape, query: OfferQuery, table: PriceTable | None = None, room: dict[tuple[str, str], float] | None = None
) -> list[Offer]:
    """The spot and on-demand offers of one shape that the query wants and that have a price
    (the Billing Catalog's where ``table`` has every part, else the snapshot's)."""
    markets = [m for m, wanted in ((Market.ON_DEMAND, query.on_demand), (Market.SPOT, query.spot)) if wanted]
    priced: dict[Market, tuple[float, str]] = {}
    for market in (Market.ON_DEMAND, Market.SPOT):
        live = live_price(shape, market, table)
        fallback = price(shape, market) if live is None else None
        if live is not None or fallback is not None:
            priced[market] = (live, pricing.SOURCE) if live is not None else (fallback, SOURCE)
    on_demand = priced.get(Market.ON_DEMAND, (None, ""))[0]
    out = []
    for market in markets:
        if market not in priced:
            continue
        p, source = priced[market]
        rate, src = (
            (0.0, None)
            if market is Market.ON_DEMAND
            else spot_interruption_estimate("gcp", shape.zone, shape.accelerator)
        )
        extra = {"interruptions_per_hour": rate, "interruption_source": src} if src is not None else {}
        pool = PoolKey(
            provider="gcp", region=shape.region, zone=shape.zone, instance_type=shape.instance_type, market=market
        )
        out.append(
            Offer(
                pool=pool,
                accelerator=shape.accelerator,
                gpus=shape.gpus,
                vcpus=shape.vcpus,
                memory_gib=shape.memory_gib,
                price_per_hour=p,
                on_demand_price=on_demand,
                capacity_hint=vms_within_quota(shape, market, room),
                source=source,
                **extra,
            )
        )
    return out


def quota_metric(accelerator_type: str) -> str:
    """GCE's GPU quota metric: ``nvidia-tesla-t4`` -> ``NVIDIA_T4_GPUS``,
    ``nvidia-h100-80gb`` -> ``NVIDIA_H100_GPUS``."""
    core = accelerator_type.upper().replace("-", "_").replace("NVIDIA_TESLA_", "NVIDIA_")
    if core != "NVIDIA_A100_80GB":  # the one type whose memory size is part of its metric
        core = re.sub(r"_(80GB|141GB)$", "", core)
    return core + "_GPUS"


def quota_room(api: Any) -> dict[tuple[str, str], float] | None:
    """``(region, metric) -> limit - usage`` of every region; None when quotas cannot be read."""
    from fleet.errors import ProviderError

    try:
        regions = [
            r
            for page in api.pages(
                api.regions.list, kind="compute#regionList", what="list regions", request={"project": api.project}
            )
            for r in page.items
        ]
    except ProviderError:
        return None
    return {(r.name, q.metric): q.limit - q.usage for r in regions for q in r.quotas}


def vms_within_quota(shape: Shape, market: Market, room: dict[tuple[str, str], float] | None) -> int | None:
    """How many VMs of ``shape`` the region's GPU quota still allows (None: unknown)."""
    if room is None:
        return None
    metric = quota_metric(shape.accelerator_type)
    free = room.get((shape.region, metric))
    if market is Market.SPOT and room.get((shape.region, f"PREEMPTIBLE_{metric}"), 0) > 0:
        free = room[(shape.region, f"PREEMPTIBLE_{metric}")]
    return None if free is None else max(0, int(free // shape.gpus))


def _aggregated(api: Any, client: Any, field_name: str, kind: str) -> dict[str, list[Any]]:
    """``zone -> rows`` of one aggregated list (every page; ``kind`` names the list, ``GceApi.pages``)."""
    out: dict[str, list[Any]] = {}
    pages = api.pages(
        client.aggregated_list, kind=kind, what=f"list {field_name.replace('_', ' ')}", project=api.project
    )
    for scope, scoped in (item for page in pages for item in page.items.items()):
        rows = list(getattr(scoped, field_name))
        if rows and scope.startswith("zones/"):
            out[scope.split("/", 1)[1]] = rows
    return out


def list_offers(api: Any, query: OfferQuery) -> list[Offer]:
    """Offers of every GPU shape in every zone of the project, filtered by ``query``."""
    machine_types = _aggregated(api, api.machine_types, "machine_types", "compute#machineTypeAggregatedList")
    accelerator_types = _aggregated(
        api, api.accelerator_types, "accelerator_types", "compute#acceleratorTypeAggregatedList"
    )
    table = pricing.live_prices(stand_in=bool(api.endpoint))
    room = quota_room(api)
    accs = {a.upper() for a in query.accelerators}
    regions = set(query.regions)
    out = []
    for shape in shapes(machine_types, accelerator_types):
        if (accs and shape.accelerator.upper() not in accs) or (regions and shape.region not in regions):
            continue
        out.extend(offers_for(shape, query, table, room))
    return out
