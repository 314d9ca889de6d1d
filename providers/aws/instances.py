"""Reading EC2 instances as spotfleet ``Instance`` values, finding them by tag, terminating them.

An instance belongs to a fleet only through its ``spotfleet:fleet`` tag; nothing here touches an
instance without one. A spot instance that AWS itself terminated (``StateReason`` code
``Server.SpotInstanceTermination``) is reported as ``preempted`` with ``ended_at`` taken from
AWS's own ``StateTransitionReason`` time, not the time we noticed. Every described instance
is checked against :class:`Described` first: one without an id or a state means the answer was
not read right (MalformedResponseError), never an instance to skip.
"""

from __future__ import annotations

import logging
import re
from calendar import timegm
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fleet.errors import ProviderError
from fleet.model import TAG_FLEET, TAG_POOL, Instance, InstanceState, PoolKey
from providers.kit.responses import check

log = logging.getLogger(__name__)

TAG_TOKEN = "spotfleet:token"
TAG_REQUEST = "spotfleet:request"  # fingerprint of the launch request under that token
TAG_SHORTFALL = "spotfleet:shortfall"  # vendor code of a partial launch's shortfall
TAG_ACCELERATOR = "spotfleet:accelerator"
TAG_GPUS = "spotfleet:gpus"
TAG_PRICE = "spotfleet:price"

STATES = {
    "pending": InstanceState.PENDING,
    "running": InstanceState.RUNNING,
    "stopping": InstanceState.STOPPED,
    "stopped": InstanceState.STOPPED,
    "shutting-down": InstanceState.TERMINATED,
    "terminated": InstanceState.TERMINATED,
}
SPOT_TERMINATION = "Server.SpotInstanceTermination"
_REASON_TIME = re.compile(r"\((\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) (?:GMT|UTC)\)")
_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


class _Tag(BaseModel):
    Key: str
    Value: str


class _State(BaseModel):
    model_config = ConfigDict(extra="allow")

    Name: str = Field(min_length=1)


class _Instance(BaseModel):
    model_config = ConfigDict(extra="allow")

    InstanceId: str = Field(min_length=1)
    State: _State
    Tags: list[_Tag] = []


class Described(BaseModel):
    """One ``Reservations`` item of DescribeInstances, as far as this module reads it."""

    model_config = ConfigDict(extra="allow")

    Instances: list[_Instance]


def tags_of(raw: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw.get("Tags", [])}


def ended_at(raw: dict[str, Any]) -> float | None:
    """When AWS says the instance stopped or ended (``StateTransitionReason``), if it says."""
    m = _REASON_TIME.search(raw.get("StateTransitionReason") or "")
    return float(timegm(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timetuple())) if m else None


def to_instance(raw: dict[str, Any]) -> Instance | None:
    """An Instance from a DescribeInstances item; None when it carries no pool tag."""
    tags = tags_of(raw)
    try:
        pool = PoolKey.from_id(tags[TAG_POOL])
    except (KeyError, ValueError):
        return None
    state = STATES.get(raw["State"]["Name"], InstanceState.PENDING)
    end = None
    if state is InstanceState.TERMINATED:
        if raw.get("StateReason", {}).get("Code") == SPOT_TERMINATION:
            state = InstanceState.PREEMPTED
        end = ended_at(raw)
    launched = raw.get("LaunchTime")
    return Instance(
        id=raw["InstanceId"],
        fleet=tags.get(TAG_FLEET, ""),
        pool=pool,
        state=state,
        accelerator=tags.get(TAG_ACCELERATOR, ""),
        gpus=int(tags.get(TAG_GPUS, "1") or 1),
        price_per_hour=float(tags.get(TAG_PRICE, "0") or 0),
        launched_at=launched.timestamp() if isinstance(launched, datetime) else 0.0,
        ended_at=end,
        tags=tags,
        address=str(raw.get("PrivateIpAddress") or ""),
    )


def describe(aws, region: str, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every instance in ``region`` matching ``filters`` (each checked against :class:`Described`)."""
    out = []
    for reservation in aws.pages("ec2", region, "describe_instances", "Reservations", Filters=filters):
        check(Described, reservation, provider="aws", what="describe_instances", region=region)
        out.extend(reservation["Instances"])
    return out


def list_fleet(aws, region: str, fleet: str) -> list[Instance]:
    """The fleet's live instances in ``region``, plus spot instances AWS took back (as preempted)."""
    raw = describe(
        aws,
        region,
        [
            {"Name": f"tag:{TAG_FLEET}", "Values": [fleet]},
            {
                "Name": "instance-state-name",
                "Values": ["pending", "running", "stopping", "stopped", "shutting-down", "terminated"],
            },
        ],
    )
    out = []
    for item in raw:
        inst = to_instance(item)
        if inst is None or inst.fleet != fleet:
            continue
        if inst.state.alive or inst.state is InstanceState.STOPPED or inst.state is InstanceState.PREEMPTED:
            out.append(inst)
    return out


def terminate(aws, region: str, ids: Sequence[str]) -> list[str]:
    """Terminate those of ``ids`` in ``region`` that carry a fleet tag and are not ended; the ids ended."""
    wanted = [i for i in dict.fromkeys(ids) if _ID.match(i)]
    if not wanted:
        return []
    found = describe(aws, region, [{"Name": "instance-id", "Values": wanted}])
    ours, theirs = _split(found)
    for raw in theirs:
        log.warning("aws: not terminating %s: it carries no %s tag", raw["InstanceId"], TAG_FLEET)
    doomed = [r["InstanceId"] for r in ours if r["State"]["Name"] not in ("shutting-down", "terminated")]
    if doomed:
        aws.call("ec2", region, "terminate_instances", InstanceIds=doomed)
    return doomed


def _split(found: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    ours, theirs = [], []
    for raw in found:
        (ours if tags_of(raw).get(TAG_FLEET) else theirs).append(raw)
    return ours, theirs


def console_output(aws, instance: Instance) -> str:
    """The newest console output of one of the fleet's instances (``GetConsoleOutput`` with
    ``Latest``; "" before the instance wrote any). botocore decodes the base64 ``Output`` (a
    value it cannot decode is left as sent, and shown escaped as any console text). Raises
    ProviderError for an id that is not an EC2 instance id, or an answer that is not text."""
    if not _ID.match(instance.id):
        raise ProviderError("aws", f"{instance.id!r} is not an EC2 instance id", code="InvalidInstanceID.Malformed")
    got = aws.call("ec2", instance.pool.region, "get_console_output", InstanceId=instance.id, Latest=True)
    output = got.get("Output", "") if isinstance(got, dict) else None
    if not isinstance(output, str):
        raise ProviderError(
            "aws",
            f"GetConsoleOutput for {instance.id}: the answer holds no text output",
            region=instance.pool.region,
            code="MalformedResponse",
        )
    return output
