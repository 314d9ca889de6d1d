"""RunPod pods as spotfleet instances, and the label that makes a pod ours (pure).

RunPod pods carry no tags, only a ``name`` and an ``env``, and ``GET /v2/pods`` answers both.
Ours: the name ``spotfleet-<fleet>`` (readable in the console) and the variable
``SPOTFLEET_LABEL`` = the kit's label (``providers.kit.rented.Label``,
``spotfleet|<fleet>|<pool id>|<plan id>|<token>|<count>``): fleet and pool
(discovery), the plan, and the launch token with its count (idempotency: list by label before
creating). Extra tags travel as JSON in ``SPOTFLEET_TAGS``. No other variable of a pod is ever
read: some hold the node's credentials. A pod without a readable label is not ours, whatever
its name.

States (``status``): ``PROVISIONING``/``STARTING`` -> pending; ``RUNNING`` -> running;
``EXITED``/``ERROR`` (spotfleet never stops a pod) -> stopped, reason ``lost``: RunPod gives no
notice before a host goes away or a container dies, the status is the only sign. The pod still
exists (and may bill its disk, which the API does not price: ``cost`` is 0), so ``fleet down``
deletes it and a rerun of ``fleet up`` replaces it; ``TERMINATED`` -> terminated.

What a pod bills (``billed_rate``): its ``cost`` in USD per hour (the v2 Pod's field; GraphQL
called it ``costPerHr``), on-demand (v2 sells no interruptible pods).
"""

from __future__ import annotations

import json
import math

from fleet.model import TAG_FLEET, TAG_PLAN, TAG_POOL, BilledRate, Instance, InstanceState, PoolKey
from providers.kit.rented import Label
from providers.kit.responses import malformed
from providers.runpod.offers import GPU_TYPES
from providers.runpod.schemas import Pod

LABEL_ENV = "SPOTFLEET_LABEL"
TAGS_ENV = "SPOTFLEET_TAGS"
NAME_PREFIX = "spotfleet-"
_PENDING = ("PROVISIONING", "STARTING")
_LOST = ("EXITED", "ERROR")


def label_of(pod: Pod) -> Label | None:
    """The label a pod carries; None for a pod spotfleet did not make (whatever its name)."""
    return Label.parse(pod.env.get(LABEL_ENV), "runpod")


def _pod_tags(pod: Pod) -> dict[str, str]:
    try:
        data = json.loads(str(pod.env.get(TAGS_ENV) or "{}"))
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def is_lost(pod: Pod) -> bool:
    return pod.status in _LOST


def to_instance(pod: Pod, label: Label, now: float, lost_since: float | None = None) -> Instance:
    """One listed pod of ours as an Instance (see the module doc for states and prices)."""
    pool = PoolKey.from_id(label.pool)
    gpus = pod.gpu.count if pod.gpu else 1
    acc = GPU_TYPES.get(pod.gpu.id if pod.gpu else "", ("", "unknown"))[1]
    reason, ended = "", None
    if pod.status in _PENDING:
        state = InstanceState.PENDING
    elif pod.status == "RUNNING":
        state = InstanceState.RUNNING
    elif pod.status == "TERMINATED":
        state, reason, ended = InstanceState.TERMINATED, "terminated", now
    else:
        state, reason = InstanceState.STOPPED, "lost"
        ended = lost_since if lost_since is not None else now
    price = 0.0 if state is not InstanceState.RUNNING and state is not InstanceState.PENDING else float(pod.cost or 0)
    tags = {**_pod_tags(pod), TAG_FLEET: label.fleet, TAG_POOL: label.pool}
    if label.plan:
        tags[TAG_PLAN] = label.plan
    return Instance(
        id=pod.id,
        fleet=label.fleet,
        pool=pool,
        state=state,
        accelerator=acc,
        gpus=gpus,
        price_per_hour=round(price, 6),
        launched_at=_epoch(pod.createdAt, now),
        ended_at=ended,
        reason=reason,
        tags=tags,
        address=_address(pod),
    )


def billed_rate(pod: Pod, now: float) -> BilledRate:
    """What a pending or running pod bills (see the module doc); one without a usable ``cost`` is
    a malformed answer, never a guessed rate."""
    cost = pod.cost
    if cost is None or not math.isfinite(cost) or cost < 0:
        raise malformed(
            "runpod",
            f"list pods (pod {pod.id})",
            pod.model_dump(exclude={"env"}),
            detail="a pending or running pod without a cost per hour",
        )
    return BilledRate(per_hour=round(float(cost), 6), source="instance", rental="on-demand", at=now)


def _epoch(stamp: str | None, default: float) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return default


def _address(pod: Pod) -> str:
    """The pod's public address from its runtime ports ("" until it runs)."""
    ports = (pod.runtime or {}).get("ports") if isinstance(pod.runtime, dict) else None
    for port in ports if isinstance(ports, list) else []:
        if isinstance(port, dict) and isinstance(port.get("ip"), str):
            return port["ip"].strip()
    return ""
