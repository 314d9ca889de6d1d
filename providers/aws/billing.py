"""What EC2 bills for the fleet's instances (``providers.base.ReadsBilledRate``).

EC2 has no per-instance rate in DescribeInstances. A spot instance is billed the spot price
of its type in its Availability Zone, which moves; what it billed at launch is the
DescribeSpotPriceHistory entry in effect then (``Linux/UNIX``, the newest entry at or before
``launched_at``; the oldest entry when every one is later, as when the launch is older than
the history kept): source ``spot-history``, rental ``spot``. An on-demand instance is billed
the list price of its type in its region, taken from the shipped catalog (source ``list``,
rental ``on-demand``); a type the catalog does not know is left out, as is an instance EC2 no
longer describes as pending or running (DescribeInstances by id, one call per region).

API: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html
(``InstanceTypes``, ``ProductDescriptions``, ``StartTime``/``EndTime``, paged by ``NextToken``;
each entry has ``AvailabilityZone`` (a zone *name*; pools name zone IDs, mapped through
DescribeAvailabilityZones), ``InstanceType``, ``ProductDescription``, ``SpotPrice`` (a decimal
string) and ``Timestamp``). An entry that cannot be read is a malformed answer, never skipped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from fleet.catalog import on_demand_reference
from fleet.model import BilledRate, Instance, Market
from providers.kit.responses import malformed

PRODUCT = "Linux/UNIX"


def billed_rates(aws: Any, instances: Sequence[Instance], now: float) -> dict[str, BilledRate]:
    """Instance id -> what EC2 bills for it (see the module doc); one history call per region."""
    instances = _alive(aws, instances)
    out: dict[str, BilledRate] = {}
    spot: dict[str, list[Instance]] = {}
    for inst in instances:
        if inst.pool.market is Market.SPOT:
            spot.setdefault(inst.pool.region, []).append(inst)
    listed = on_demand_reference(i.pool.id for i in instances if i.pool.market is Market.ON_DEMAND)
    for inst in instances:
        if inst.pool.id in listed and inst.pool.market is Market.ON_DEMAND:
            out[inst.id] = BilledRate(per_hour=listed[inst.pool.id], source="list", rental="on-demand", at=now)
    for region, group in sorted(spot.items()):
        out.update(_spot_rates(aws, region, group, now))
    return out


def _alive(aws: Any, instances: Sequence[Instance]) -> list[Instance]:
    """Those of ``instances`` EC2 describes as pending or running."""
    from providers.aws.instances import describe

    by_region: dict[str, list[Instance]] = {}
    for inst in instances:
        by_region.setdefault(inst.pool.region, []).append(inst)
    alive: set[str] = set()
    for region, group in sorted(by_region.items()):
        found = describe(
            aws,
            region,
            [
                {"Name": "instance-id", "Values": [i.id for i in group]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ],
        )
        alive |= {raw["InstanceId"] for raw in found}
    return [i for i in instances if i.id in alive]


def _spot_rates(aws: Any, region: str, group: list[Instance], now: float) -> dict[str, BilledRate]:
    zones = aws.call("ec2", region, "describe_availability_zones")["AvailabilityZones"]
    zone_id = {z["ZoneName"]: z["ZoneId"] for z in zones if z.get("ZoneName") and z.get("ZoneId")}
    start = datetime.fromtimestamp(min(i.launched_at for i in group), tz=timezone.utc)
    rows = aws.pages(
        "ec2",
        region,
        "describe_spot_price_history",
        "SpotPriceHistory",
        InstanceTypes=sorted({i.pool.instance_type for i in group}),
        ProductDescriptions=[PRODUCT],
        StartTime=start,
    )
    history: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for row in rows:
        itype, zone, stamp, price = _entry(row, region)
        if not row["ProductDescription"].startswith(PRODUCT) or zone not in zone_id:
            continue
        history.setdefault((itype, zone_id[zone]), []).append((stamp, price))
    out = {}
    for inst in group:
        entries = history.get((inst.pool.instance_type, inst.pool.zone))
        if entries:
            out[inst.id] = BilledRate(
                per_hour=_at(entries, inst.launched_at), source="spot-history", rental="spot", at=now
            )
    return out


def _entry(row: Any, region: str) -> tuple[str, str, float, float]:
    """(type, zone name, timestamp, price) of one history entry, or MalformedResponseError."""
    try:
        stamp = row["Timestamp"]
        when = stamp.timestamp() if isinstance(stamp, datetime) else float(stamp)
        price = float(row["SpotPrice"])
        if (
            not isinstance(row["InstanceType"], str)
            or not isinstance(row["AvailabilityZone"], str)
            or not isinstance(row["ProductDescription"], str)
            or not math.isfinite(price)
            or price < 0
        ):
            raise ValueError("wrong types")
    except (KeyError, TypeError, ValueError, AttributeError):
        raise malformed(
            "aws",
            "describe_spot_price_history",
            row,
            detail="an entry without a readable type, zone, product, price or time",
            region=region,
        ) from None
    return row["InstanceType"], row["AvailabilityZone"], when, price


def _at(entries: Iterable[tuple[float, float]], when: float) -> float:
    """The price in effect at ``when``: the newest entry not after it, else the oldest one."""
    ordered = sorted(entries)
    before = [p for t, p in ordered if t <= when]
    return before[-1] if before else ordered[0][1]
