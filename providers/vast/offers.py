"""Vast.ai search results as spotfleet offers (pure: builds queries, maps rows; no I/O).

* Vast names GPUs ``"H100 SXM"``, ``"RTX 4090"``: :data:`GPU_NAMES` maps them to the catalog's
  accelerators (one table; A100 and V100 split by memory).
* Each search row is one machine's bundle of ``num_gpus``: a pool of one instance. Its
  instance type names the bundle and the machine, ``2x-H100_SXM-m12345``, so a pool id is
  stable while ask ids come and go (:func:`instance_type`, :func:`parse_instance_type`).
* Region: the host's location as ``fleet.catalog.vast_region`` names it (``us-texas``).
* Price = bid (interruptible) or ``dph_base`` (on-demand) + storage for the spec's disk.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fleet.catalog import vast_region
from fleet.model import InterruptionSource, Market, Offer, PoolKey
from fleet.spec import VastBid
from providers.vast.bids import bid_cap, bid_price, interruptions_per_hour
from providers.vast.settings import VastSettings

#: Vast ``gpu_name`` -> catalog accelerator. A name with a memory split maps to a tuple
#: ``(small, large, threshold MB)``.
GPU_NAMES: dict[str, str | tuple[str, str, int]] = {
    "B200": "B200",
    "H200": "H200",
    "H200 NVL": "H200",
    "GH200 SXM": "GH200",
    "H100 SXM": "H100",
    "H100 PCIE": "H100",
    "H100 NVL": "H100-NVL",
    "A100 SXM4": ("A100-40GB", "A100-80GB", 60_000),
    "A100 PCIE": ("A100-40GB", "A100-80GB", 60_000),
    "A100X": "A100-80GB",
    "L40S": "L40S",
    "L40": "L40",
    "L4": "L4",
    "A40": "A40",
    "A10": "A10",
    "RTX 6000Ada": "RTX6000-ADA",
    "RTX A6000": "A6000",
    "RTX A5000": "A5000",
    "RTX A4500": "A4500",
    "RTX A4000": "A4000",
    "RTX 4000Ada": "RTX4000-ADA",
    "RTX 5090": "RTX5090",
    "RTX 4090": "RTX4090",
    "RTX 4080S": "RTX4080",
    "RTX 4080": "RTX4080",
    "RTX 3090": "RTX3090",
    "RTX 3060": "RTX3060",
    "Tesla V100": ("V100", "V100-32GB", 24_000),
    "Tesla T4": "T4",
    "Tesla P100": "P100",
    "Tesla P4": "P4",
    "MI300X": "MI300X",
}

#: Hours in a month, for ``storage_cost`` ($/GB/month).
HOURS_PER_MONTH = 730.0
SEARCH_LIMIT = 1000
_TYPE = re.compile(r"^(\d+)x-([A-Za-z0-9_.+-]+)-m(\d+)$")


def accelerator(gpu_name: str, gpu_ram_mb: float = 0) -> str | None:
    """The catalog accelerator of a Vast GPU name, None when spotfleet does not know it."""
    entry = GPU_NAMES.get(gpu_name)
    if isinstance(entry, tuple):
        small, large, threshold = entry
        return large if gpu_ram_mb >= threshold else small
    return entry


def vast_names(accelerators: Iterable[str]) -> list[str]:
    """The Vast GPU names that map to any of ``accelerators`` (every known name when empty)."""
    wanted = {a.upper() for a in accelerators}
    out = []
    for name, entry in GPU_NAMES.items():
        targets = set(entry[:2]) if isinstance(entry, tuple) else {entry}
        if not wanted or targets & wanted:
            out.append(name)
    return sorted(out)


def instance_type(num_gpus: int, gpu_name: str, machine_id: int) -> str:
    return f"{num_gpus}x-{re.sub(r'[^A-Za-z0-9]+', '_', gpu_name).strip('_')}-m{machine_id}"


def parse_instance_type(text: str) -> tuple[int, int] | None:
    """``(num_gpus, machine_id)`` of a pool's instance type; None for a snapshot pool."""
    m = _TYPE.match(text)
    return (int(m.group(1)), int(m.group(3))) if m else None


def country(geolocation: str) -> str:
    """``"Texas, US"`` -> ``"US"`` (the last part that is a two-letter code)."""
    parts = [p.strip() for p in (geolocation or "").split(",")]
    codes = [p for p in parts if len(p) == 2 and p.isalpha()]
    return codes[0].upper() if codes else ""


def storage_per_hour(storage_cost: float, disk_gb: float) -> float:
    return (storage_cost or 0.0) * disk_gb / HOURS_PER_MONTH


def search_body(market: Market, accelerators: Iterable[str], settings: VastSettings) -> dict[str, Any]:
    """The POST /api/v0/bundles/ body for one market (``type`` bid or on-demand)."""
    body: dict[str, Any] = {
        "verified": {"eq": True},
        "external": {"eq": False},
        "rentable": {"eq": True},
        "rented": {"eq": False},
        "reliability2": {"gte": settings.min_reliability},
        "inet_down": {"gte": settings.min_download_mbps},
        "cuda_max_good": {"gte": settings.min_cuda},
        "disk_space": {"gte": settings.disk_gb},
        "num_gpus": {"gte": 1},
        "order": [["dph_total", "asc"]],
        "type": "bid" if market is Market.SPOT else "on-demand",
        "allocated_storage": settings.disk_gb,
        "limit": SEARCH_LIMIT,
    }
    names = vast_names(accelerators)
    if names:
        body["gpu_name"] = {"in": names}
    return body


@dataclass(frozen=True)
class Ask:
    """What launching into a pool needs from the search row it came from."""

    ask_id: int
    machine_id: int
    num_gpus: int
    bid: float | None  # our bid for an interruptible pool
    dph_base: float
    min_bid: float | None
    storage_per_hour: float


def to_offer(
    row: dict[str, Any], market: Market, settings: VastSettings, max_per_gpu_hour: float | None
) -> tuple[Offer, Ask] | None:
    """One search row as an offer (and what a launch needs), None when it does not qualify:
    unknown GPU, a country the settings exclude, or a bid that cannot fit under the caps."""
    acc = accelerator(str(row.get("gpu_name", "")), float(row.get("gpu_ram") or 0))
    gpus = int(row.get("num_gpus") or 0)
    if acc is None or gpus <= 0:
        return None
    cc = country(str(row.get("geolocation", "")))
    if (settings.countries is not None and cc not in {c.upper() for c in settings.countries}) or cc in {
        c.upper() for c in settings.exclude_countries
    }:
        return None
    storage = storage_per_hour(float(row.get("storage_cost") or 0), settings.disk_gb)
    dph_base = float(row.get("dph_base") or max(0.0, float(row.get("dph_total") or 0) - storage))
    min_bid = row.get("min_bid")
    pool = PoolKey(
        provider="vast",
        region=vast_region(str(row.get("geolocation") or "")),
        zone="",
        instance_type=instance_type(gpus, str(row["gpu_name"]), int(row["machine_id"])),
        market=market,
    )
    common = dict(
        pool=pool,
        accelerator=acc,
        gpus=gpus,
        vcpus=_num(row.get("cpu_cores_effective")),
        memory_gib=_gib(row.get("cpu_ram")),
        on_demand_price=round(dph_base + storage, 4),
        capacity_hint=1,
        source="live",
    )
    ask_id = int(row.get("ask_contract_id") or row["id"])
    if market is Market.ON_DEMAND:
        offer = Offer(price_per_hour=round(dph_base + storage, 4), **common)
        return offer, Ask(ask_id, int(row["machine_id"]), gpus, None, dph_base, None, storage)
    if min_bid is None:
        return None
    cap = bid_cap(dph_base, gpus, storage, settings.bid, max_per_gpu_hour)
    bid = bid_price(float(min_bid), cap, settings.bid)
    if bid is None:
        return None
    rate = interruptions_per_hour(float(row.get("reliability2") or 0), bid, float(min_bid))
    offer = Offer(
        price_per_hour=round(bid + storage, 4),
        interruptions_per_hour=rate,
        interruption_source=InterruptionSource.PROVIDER_PRIOR,
        **common,
    )
    return offer, Ask(ask_id, int(row["machine_id"]), gpus, bid, dph_base, float(min_bid), storage)


def rebid(
    min_bid: float, dph_base: float, gpus: int, storage: float, bid: VastBid, max_per_gpu_hour: float | None
) -> float | None:
    """The bid for an outbid instance now that ``min_bid`` moved; None when over the caps."""
    return bid_price(min_bid, bid_cap(dph_base, gpus, storage, bid, max_per_gpu_hour), bid)


def _num(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _gib(mb: Any) -> float | None:
    value = _num(mb)
    return round(value / 1024, 1) if value is not None else None
