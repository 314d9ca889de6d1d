"""Lambda instances as spotfleet instances, and the tags and name that make them ours (pure).

Lambda keeps key/value tags on an instance (``tags`` on launch and in every instance answer,
API 1.8; keys ``^[a-z][a-z0-9-:]+$`` of at most 55 characters, values of at most 128). The
fleet's instances carry ``spotfleet:fleet``, ``spotfleet:pool`` and ``spotfleet:token`` (the
launch token: a rerun finds what an earlier attempt started), ``spotfleet:launched`` (Lambda
reports no creation time) plus the plan and the request's
other tags where they fit Lambda's rules (a tag that does not fit is left off, never bent).
The tags are the truth: an instance is this fleet's only when it carries the fleet's tag. The
name, ``spotfleet-<fleet>-<token hash>``, is for people reading the Lambda console; an
instance someone renames stays ours, and one merely named ``spotfleet-...`` without our tags
is never listed, terminated or counted.

States: ``booting`` -> pending, ``active`` and ``unhealthy`` (still billed, still the
account's) -> running, ``terminating`` / ``terminated`` -> terminated, ``preempted`` ->
preempted. The address is the private IP (other nodes reach it there).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from fleet.model import TAG_FLEET, TAG_POOL, Instance, InstanceState, Market, PoolKey
from providers.lambda_cloud.offers import accelerator
from providers.lambda_cloud.schemas import Instance as Row

TAG_TOKEN = "spotfleet:token"
#: When the launch was sent (epoch seconds): Lambda's answers carry no creation time.
TAG_LAUNCHED = "spotfleet:launched"
NAME_PREFIX = "spotfleet-"
MAX_NAME = 64
_KEY = re.compile(r"^[a-z][a-z0-9-:]+$")

STATES = {
    "booting": InstanceState.PENDING,
    "active": InstanceState.RUNNING,
    "unhealthy": InstanceState.RUNNING,
    "terminating": InstanceState.TERMINATED,
    "terminated": InstanceState.TERMINATED,
    "preempted": InstanceState.PREEMPTED,
}


def fits(key: str, value: str) -> bool:
    """Whether Lambda takes this tag as it is."""
    return bool(_KEY.match(key)) and len(key) <= 55 and len(value) <= 128


def launch_tags(tags: Mapping[str, str], fleet: str, pool: PoolKey, token: str, now: float) -> list[dict[str, str]]:
    """The ``tags`` of a launch body: ours first, then every other tag of the request that fits."""
    ours = {TAG_FLEET: fleet, TAG_POOL: pool.id, TAG_TOKEN: token, TAG_LAUNCHED: f"{now:.0f}"}
    unfit = [k for k, v in ours.items() if not fits(k, v)]
    if unfit:  # these make the instances findable: never launch without them
        raise ValueError(f"{', '.join(unfit)} would not fit Lambda's tag rules (a value of at most 128 characters)")
    merged = {**ours, **{k: v for k, v in sorted(tags.items()) if k not in ours and fits(k, v)}}
    return [{"key": k, "value": v} for k, v in merged.items()]


def instance_name(fleet: str, token: str) -> str:
    """The console name of a launch's instances (64 characters at most)."""
    digest = hashlib.sha256(token.encode()).hexdigest()[:10]
    return f"{NAME_PREFIX}{fleet}"[: MAX_NAME - 11] + f"-{digest}"


def owner(row: Row) -> str:
    """The fleet ``row`` belongs to, "" when spotfleet did not start it."""
    return row.tag_map().get(TAG_FLEET, "")


def launched_at(tags: Mapping[str, str]) -> float | None:
    try:
        return float(tags[TAG_LAUNCHED])
    except (KeyError, ValueError):
        return None


def to_instance(row: Row, now: float, first_seen: float | None = None) -> Instance:
    """One tagged row as an Instance (the caller checked :func:`owner`); its launch time is the
    one its tag says, else ``first_seen``."""
    tags = row.tag_map()
    started = launched_at(tags)
    t = row.instance_type
    try:
        pool = PoolKey.from_id(tags.get(TAG_POOL, ""))
    except (ValueError, TypeError):  # a pool tag someone edited: the row still says where it runs
        pool = PoolKey(
            provider="lambda", region=row.region.name, zone="", instance_type=t.name, market=Market.ON_DEMAND
        )
    state = STATES.get(row.status, InstanceState.PENDING)
    acc = accelerator(t.gpu_description, t.specs.gpus) or "unknown"
    return Instance(
        id=row.id,
        fleet=tags[TAG_FLEET],
        pool=pool,
        state=state,
        accelerator=acc,
        gpus=t.specs.gpus,
        price_per_hour=round(t.price_cents_per_hour / 100, 4),
        launched_at=started if started is not None else first_seen if first_seen is not None else now,
        ended_at=now if not state.alive else None,
        reason=row.status if state is InstanceState.PREEMPTED else "",
        tags=tags,
        address=(row.private_ip or "").strip(),
    )
