"""RunPod GPU types as spotfleet pools and offers (pure: no I/O).

A pool is one pod shape in one data center: ``runpod/<country>/<data center>/<n>x_<gpu>_<CLOUD>/
on-demand``, the shipped snapshot's naming (``1x_H100-SXM_SECURE``), so a snapshot pool is
launchable as it stands. ``<CLOUD>`` is ``SECURE`` or ``COMMUNITY``; ``<gpu>`` is our short name
for a RunPod GPU type id (:data:`GPU_TYPES`); the country is read from the data-center id
(``US-KS-2`` -> ``US``, ``EU-RO-1`` -> ``RO``, ``EUR-IS-1`` -> ``IS``).

Offers come from ``GET /v2/catalog/gpus?include=AVAILABILITY&product=POD&cloud=<CLOUD>``: the
per-GPU list price times the pod's GPU count; one offer per data center that reports stock
(``availability`` LOW/MEDIUM/HIGH) and per count 1, 2, 4, 8 up to the cloud's ``maxCount``.
Availability is a level, not a count, so ``capacity_hint`` stays unknown except ``NONE`` (0).

Interruptible pods: the v2 catalog quotes no interruptible price and a v2 create takes no bid
(the GraphQL ``podRentInterruptable`` mutation is being withdrawn), so no spot offer is made, and
the registration record says ``spot=False``: ``fleet.catalog`` then keeps the snapshot's RunPod
spot rows with ``capacity_hint=0``, so the planner says why it does not use them and never does.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from fleet.model import Market, Offer, PoolKey
from providers.runpod.schemas import GpuType

#: RunPod GPU type id -> (the pool's short name, our accelerator name), as in the shipped snapshot.
GPU_TYPES: dict[str, tuple[str, str]] = {
    "NVIDIA A100 80GB PCIe": ("A100-80GB", "A100-80GB"),
    "NVIDIA A100-SXM4-80GB": ("A100-80GB-SXM", "A100-80GB"),
    "NVIDIA A40": ("A40", "A40"),
    "NVIDIA B200": ("B200", "B200"),
    "NVIDIA H100 NVL": ("H100-NVL", "H100-NVL"),
    "NVIDIA H100 80GB HBM3": ("H100-SXM", "H100"),
    "NVIDIA H100 PCIe": ("H100", "H100"),
    "NVIDIA H200": ("H200-SXM", "H200"),
    "NVIDIA L4": ("L4", "L4"),
    "NVIDIA L40": ("L40", "L40"),
    "NVIDIA L40S": ("L40S", "L40S"),
    "AMD Instinct MI300X OAM": ("MI300X", "MI300X"),
    "NVIDIA GeForce RTX 3090": ("RTX3090", "RTX3090"),
    "NVIDIA RTX 4000 Ada Generation": ("RTX4000-Ada", "RTX4000-ADA"),
    "NVIDIA GeForce RTX 4090": ("RTX4090", "RTX4090"),
    "NVIDIA RTX 6000 Ada Generation": ("RTX6000-Ada", "RTX6000-ADA"),
    "NVIDIA RTX A4000": ("RTXA4000", "A4000"),
    "NVIDIA RTX A4500": ("RTXA4500", "A4500"),
    "NVIDIA RTX A5000": ("RTXA5000", "A5000"),
    "NVIDIA RTX A6000": ("RTXA6000", "A6000"),
}
_BY_SHORT = {short: gpu_id for gpu_id, (short, _) in GPU_TYPES.items()}
CLOUDS = ("SECURE", "COMMUNITY")
COUNTS = (1, 2, 4, 8)
_TYPE = re.compile(r"^(\d+)x_([A-Za-z0-9-]+)_(SECURE|COMMUNITY)$")


class PodShape(NamedTuple):
    """What a pool's instance type names: the RunPod GPU type id, GPUs per pod, and the cloud."""

    gpu_id: str
    count: int
    cloud: str


def instance_type(gpu_id: str, count: int, cloud: str) -> str:
    return f"{count}x_{GPU_TYPES[gpu_id][0]}_{cloud}"


def parse_instance_type(text: str) -> PodShape | None:
    """The pod shape a pool's instance type names; None for one that is not a RunPod shape."""
    m = _TYPE.match(text)
    if m is None or m.group(2) not in _BY_SHORT or int(m.group(1)) < 1:
        return None
    return PodShape(_BY_SHORT[m.group(2)], int(m.group(1)), m.group(3))


def country(data_center: str) -> str:
    """The country code in a RunPod data-center id (``US-KS-2`` -> ``US``, ``EU-RO-1`` -> ``RO``)."""
    parts = data_center.upper().split("-")
    if len(parts) >= 3 and parts[0] in ("EU", "EUR", "AP", "SA", "OC", "AF", "ME"):
        return parts[1]
    return parts[0]


def to_offers(gpu: GpuType, cloud: str, shapes: dict[str, tuple[float | None, float | None]]) -> list[Offer]:
    """The on-demand offers one catalog row makes for ``cloud`` (see the module doc); ``shapes``
    maps an instance type to its (vCPUs, memory GiB) where the snapshot knows them."""
    if gpu.id not in GPU_TYPES:
        return []
    per_gpu = gpu.price.secure if cloud == "SECURE" else gpu.price.community
    largest = gpu.maxCount.secure if cloud == "SECURE" else gpu.maxCount.community
    if per_gpu is None or per_gpu <= 0 or largest < 1:
        return []
    out = []
    for dc in gpu.dataCenters:
        if dc.availability == "NONE":
            continue
        for count in (c for c in COUNTS if c <= largest):
            itype = instance_type(gpu.id, count, cloud)
            vcpus, mem = shapes.get(itype, (None, None))
            price = round(per_gpu * count, 6)
            out.append(
                Offer(
                    pool=PoolKey(
                        provider="runpod",
                        region=country(dc.id),
                        zone=dc.id,
                        instance_type=itype,
                        market=Market.ON_DEMAND,
                    ),
                    accelerator=GPU_TYPES[gpu.id][1],
                    gpus=count,
                    vcpus=vcpus,
                    memory_gib=mem,
                    price_per_hour=price,
                    on_demand_price=price,
                    source="live",
                )
            )
    return out
