"""AWS offers: live prices and placement per availability zone, the shipped snapshot per missing part.

For each region, five facts are read, each on its own so that one denied call costs only its
own part (which then comes from the snapshot, and is named in every offer's ``source``):

* zones: ``DescribeAvailabilityZones`` maps this account's zone names (``us-east-1a``) to zone
  IDs (``use1-az6``); pools are keyed by zone ID, the same physical zone in every account;
* GPU details: ``DescribeInstanceTypes`` (``GpuInfo``, vCPUs, memory) for the snapshot's GPU types;
* placement: ``DescribeInstanceTypeOfferings`` by availability zone;
* spot prices: ``DescribeSpotPriceHistory`` (Linux/UNIX, from now), the newest per zone and type;
* on-demand prices: the Price List API (``pricing:GetProducts``, Linux, shared tenancy, no
  pre-installed software).

Interruption rates come from the Spot Advisor band where it can be fetched, else the AWS prior.
Facts are cached on disk per endpoint and region for ``ttl`` seconds (a tenth of that when some
part came from the snapshot, so a passing failure does not linger).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from fleet.catalog import SPOT_PRIOR_PER_HOUR, snapshot_offers
from fleet.errors import ProviderError
from fleet.model import InterruptionSource, Market, Offer, PoolKey
from providers.aws.session import Aws
from providers.base import OfferQuery

#: The Price List API answers from these two regions only.
PRICING_REGION = "us-east-1"


@dataclass
class TypeInfo:
    accelerator: str
    gpus: int
    vcpus: float | None
    memory_gib: float | None


@dataclass
class RegionFacts:
    """What is known about one region; ``fallbacks`` names the parts taken from the snapshot."""

    region: str
    types: dict[str, TypeInfo] = field(default_factory=dict)
    offered: list[tuple[str, str]] = field(default_factory=list)  # (instance type, zone id)
    spot: dict[str, float] = field(default_factory=dict)  # "type zone-id" -> USD/h
    on_demand: dict[str, float] = field(default_factory=dict)  # type -> USD/h
    fallbacks: list[str] = field(default_factory=list)
    fetched_at: float = 0.0

    @classmethod
    def from_json(cls, data: dict) -> RegionFacts:
        data = dict(data)
        data["types"] = {k: TypeInfo(**v) for k, v in data["types"].items()}
        data["offered"] = [tuple(x) for x in data["offered"]]
        return cls(**data)


def snapshot_region(region: str) -> RegionFacts:
    """The snapshot's facts for ``region`` (the fallback for each live part)."""
    facts = RegionFacts(region)
    for o in snapshot_offers():
        if o.pool.provider != "aws" or o.pool.region != region:
            continue
        it = o.pool.instance_type
        facts.types.setdefault(it, TypeInfo(o.accelerator, o.gpus, o.vcpus, o.memory_gib))
        if (it, o.pool.zone) not in facts.offered:
            facts.offered.append((it, o.pool.zone))
        if o.market is Market.SPOT:
            facts.spot[f"{it} {o.pool.zone}"] = o.price_per_hour
        elif o.on_demand_price is not None:
            facts.on_demand[it] = o.on_demand_price
    return facts


def snapshot_regions() -> list[str]:
    return sorted({o.pool.region for o in snapshot_offers() if o.pool.provider == "aws"})


def fetch_region(aws: Aws, region: str) -> RegionFacts:
    """Live facts for ``region``; each part that fails or is denied comes from the snapshot."""
    snap = snapshot_region(region)
    facts = RegionFacts(region, fetched_at=time.time())
    types = sorted(snap.types) or sorted({o.pool.instance_type for o in snapshot_offers() if o.pool.provider == "aws"})
    zone_ids = _part(facts, "zones", lambda: _zone_ids(aws, region), None)
    facts.types = _part(facts, "gpu details", lambda: _types(aws, region, types, snap), snap.types)
    if zone_ids is None:  # without the name -> id map no live zone can be keyed
        facts.fallbacks += ["placement", "spot prices"]
        facts.offered, facts.spot = snap.offered, snap.spot
    else:
        facts.offered = _part(facts, "placement", lambda: _offered(aws, region, types, zone_ids), snap.offered)
        facts.spot = _part(facts, "spot prices", lambda: _spot(aws, region, types, zone_ids), snap.spot)
    facts.on_demand = _part(facts, "on-demand prices", lambda: _on_demand(aws, region, types), snap.on_demand)
    return facts


def _part(facts: RegionFacts, name: str, fetch: Callable, fallback):
    try:
        return fetch()
    except ProviderError:
        facts.fallbacks.append(name)
        return fallback


def _zone_ids(aws: Aws, region: str) -> dict[str, str]:
    zones = aws.call("ec2", region, "describe_availability_zones")["AvailabilityZones"]
    return {z["ZoneName"]: z["ZoneId"] for z in zones if z.get("ZoneId")}


def _types(aws: Aws, region: str, types: list[str], snap: RegionFacts) -> dict[str, TypeInfo]:
    out = {}
    for t in aws.pages(
        "ec2", region, "describe_instance_types", "InstanceTypes", Filters=[{"Name": "instance-type", "Values": types}]
    ):
        gpus = sum(g.get("Count", 0) for g in t.get("GpuInfo", {}).get("Gpus", []))
        if not gpus:
            continue
        name = t["InstanceType"]
        known = snap.types.get(name) or _any_snapshot_type(name)
        accelerator = known.accelerator if known else _accelerator_name(t["GpuInfo"]["Gpus"][0])
        out[name] = TypeInfo(
            accelerator, gpus, float(t["VCpuInfo"]["DefaultVCpus"]), round(t["MemoryInfo"]["SizeInMiB"] / 1024, 1)
        )
    return out


def _any_snapshot_type(name: str) -> TypeInfo | None:
    for o in snapshot_offers():
        if o.pool.provider == "aws" and o.pool.instance_type == name:
            return TypeInfo(o.accelerator, o.gpus, o.vcpus, o.memory_gib)
    return None


def _accelerator_name(gpu: dict) -> str:
    name = str(gpu.get("Name", "")).upper()
    if name == "A100":
        return "A100-80GB" if gpu.get("MemoryInfo", {}).get("SizeInMiB", 0) > 50_000 else "A100-40GB"
    return name


def _offered(aws: Aws, region: str, types: list[str], zone_ids: dict[str, str]) -> list[tuple[str, str]]:
    rows = aws.pages(
        "ec2",
        region,
        "describe_instance_type_offerings",
        "InstanceTypeOfferings",
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": types}],
    )
    return sorted({(r["InstanceType"], zone_ids[r["Location"]]) for r in rows if r["Location"] in zone_ids})


def _spot(aws: Aws, region: str, types: list[str], zone_ids: dict[str, str]) -> dict[str, float]:
    rows = aws.pages(
        "ec2",
        region,
        "describe_spot_price_history",
        "SpotPriceHistory",
        InstanceTypes=types,
        ProductDescriptions=["Linux/UNIX"],
        StartTime=datetime.now(timezone.utc),
    )
    newest: dict[str, tuple[datetime, float]] = {}
    for r in rows:
        zone = zone_ids.get(r["AvailabilityZone"])
        if zone is None or not r["ProductDescription"].startswith("Linux/UNIX"):
            continue
        key = f"{r['InstanceType']} {zone}"
        if key not in newest or r["Timestamp"] > newest[key][0]:
            newest[key] = (r["Timestamp"], float(r["SpotPrice"]))
    return {k: v[1] for k, v in newest.items()}


def _on_demand(aws: Aws, region: str, types: list[str]) -> dict[str, float]:
    filters = [
        {"Type": "TERM_MATCH", "Field": f, "Value": v}
        for f, v in (
            ("regionCode", region),
            ("operatingSystem", "Linux"),
            ("tenancy", "Shared"),
            ("capacitystatus", "Used"),
            ("preInstalledSw", "NA"),
        )
    ]
    filters.append({"Type": "ANY_OF", "Field": "instanceType", "Value": ",".join(types)})
    out: dict[str, float] = {}
    for doc in aws.pages(
        "pricing",
        PRICING_REGION,
        "get_products",
        "PriceList",
        ServiceCode="AmazonEC2",
        Filters=filters,
        FormatVersion="aws_v1",
    ):
        item = json.loads(doc) if isinstance(doc, str) else doc
        itype = item.get("product", {}).get("attributes", {}).get("instanceType")
        for term in item.get("terms", {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                usd = float(dim.get("pricePerUnit", {}).get("USD", 0) or 0)
                if itype and usd > 0:
                    out[itype] = usd
    return out


class OfferCache:
    """Region facts on disk, one JSON file per endpoint and region, fresh for ``ttl`` seconds."""

    def __init__(self, root: Path, ttl: float):
        self.root = root
        self.ttl = ttl

    def _path(self, region: str) -> Path:
        endpoint = os.environ.get("AWS_ENDPOINT_URL_EC2") or os.environ.get("AWS_ENDPOINT_URL") or "aws"
        key = hashlib.sha256(f"{endpoint} {os.environ.get('AWS_PROFILE', '')}".encode()).hexdigest()[:12]
        return self.root / f"offers-{key}-{region}.json"

    def get(self, region: str) -> RegionFacts | None:
        """Fresh facts for ``region``; an answer with snapshot parts stays fresh a tenth as long."""
        try:
            data = json.loads(self._path(region).read_text())
            facts = RegionFacts.from_json(data)
        except (OSError, ValueError, TypeError, KeyError):
            return None
        ttl = self.ttl / 10 if facts.fallbacks else self.ttl
        return facts if time.time() - facts.fetched_at < ttl else None

    def put(self, facts: RegionFacts) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self._path(facts.region).with_suffix(".tmp")
            tmp.write_text(json.dumps(asdict(facts)))
            tmp.replace(self._path(facts.region))
        except OSError:
            pass


def region_facts(aws: Aws, regions: Iterable[str], cache: OfferCache, *, refresh: bool = False) -> list[RegionFacts]:
    """Facts for every region, from the cache when fresh (unless ``refresh``), fetched in parallel."""
    regions = list(regions)
    cached = {r: None if refresh else cache.get(r) for r in regions}
    missing = [r for r, f in cached.items() if f is None]
    if missing:
        with ThreadPoolExecutor(max_workers=min(8, len(missing))) as ex:
            for facts in ex.map(lambda r: fetch_region(aws, r), missing):
                cache.put(facts)
                cached[facts.region] = facts
    return [cached[r] for r in regions]  # type: ignore[misc]


def to_offers(
    facts: RegionFacts, query: OfferQuery, interruptions: dict[str, float], allows: Callable[[str, str], bool]
) -> list[Offer]:
    """One offer per (type, zone, market) in ``facts`` that ``query`` and ``allows(region, zone)`` accept."""
    accs = {a.upper() for a in query.accelerators}
    source = "live" + (f" (snapshot for {', '.join(facts.fallbacks)})" if facts.fallbacks else "")
    out = []
    for itype, zone in facts.offered:
        info = facts.types.get(itype)
        if info is None or (accs and info.accelerator not in accs) or not allows(facts.region, zone):
            continue
        od = facts.on_demand.get(itype)
        common = dict(
            accelerator=info.accelerator,
            gpus=info.gpus,
            vcpus=info.vcpus,
            memory_gib=info.memory_gib,
            on_demand_price=od,
            source=source,
        )
        pool = dict(provider="aws", region=facts.region, zone=zone, instance_type=itype)
        if query.on_demand and od is not None:
            out.append(Offer(pool=PoolKey(**pool, market=Market.ON_DEMAND), price_per_hour=od, **common))
        spot = facts.spot.get(f"{itype} {zone}")
        if query.spot and spot is not None:
            rate = interruptions.get(itype)
            src = InterruptionSource.SPOT_ADVISOR if rate is not None else InterruptionSource.PROVIDER_PRIOR
            out.append(
                Offer(
                    pool=PoolKey(**pool, market=Market.SPOT),
                    price_per_hour=spot,
                    interruptions_per_hour=rate if rate is not None else SPOT_PRIOR_PER_HOUR["aws"],
                    interruption_source=src,
                    **common,
                )
            )
    return out
