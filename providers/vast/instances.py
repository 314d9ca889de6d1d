"""Vast instance rows as spotfleet instances, and the label that makes them ours (pure).

Vast has no tags, only a free-text ``label``. Ours is the kit's ``providers.kit.rented.Label``,
``spotfleet|<fleet>|<pool id>|<plan id>|<token>|<count>``: the fleet and pool (discovery),
the plan, and the launch token with its count (idempotency: list by label before creating).
Extra tags travel as JSON in the instance variable ``SPOTFLEET_TAGS`` and come back in the
row's ``extra_env``; no other variable of a row is ever read (some hold credentials).

States: ``actual_status == "running"`` -> running; ``cur_state == intended_status ==
next_state == "stopped"`` -> stopped, reason ``outbid`` for a bid (``stopped`` otherwise), its
price the storage it still bills; anything else alive -> pending.

What a row bills (``billed_rate``): ``dph_total`` (compute at the bid or the on-demand price,
plus storage) and the rental kind ``is_bid`` says (``bid`` or ``on-demand``: Vast rents
on-demand when a create's bid is missing or ignored, vast-cli #403).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from fleet.model import TAG_FLEET, TAG_PLAN, TAG_POOL, BilledRate, Instance, InstanceState, PoolKey
from providers.kit.rented import Label, extra_tags  # noqa: F401  (the label Vast keeps in ``label``)
from providers.kit.responses import malformed
from providers.vast.offers import accelerator, storage_per_hour

TAGS_ENV = "SPOTFLEET_TAGS"


def _row_tags(row: Mapping[str, Any]) -> dict[str, str]:
    env = row.get("extra_env") or []
    pairs = env.items() if isinstance(env, dict) else (p for p in env if isinstance(p, (list, tuple)) and len(p) == 2)
    for name, value in pairs:
        if name == TAGS_ENV:
            try:
                data = json.loads(value)
            except (TypeError, ValueError):
                return {}
            return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    return {}


def is_outbid(row: Mapping[str, Any]) -> bool:
    return row.get("cur_state") == row.get("intended_status") == row.get("next_state") == "stopped"


def to_instance(row: Mapping[str, Any], label: Label, now: float, stopped_since: float | None = None) -> Instance:
    """One listed row of ours as an Instance (see the module doc for states and prices)."""
    pool = PoolKey.from_id(label.pool)
    gpus = int(row.get("num_gpus") or 1)
    acc = accelerator(str(row.get("gpu_name", "")), float(row.get("gpu_ram") or 0)) or "unknown"
    reason = ""
    if is_outbid(row):
        state = InstanceState.STOPPED
        reason = "outbid" if row.get("is_bid") else "stopped"
        price = storage_per_hour(float(row.get("storage_cost") or 0), float(row.get("disk_space") or 0))
    else:
        state = InstanceState.RUNNING if row.get("actual_status") == "running" else InstanceState.PENDING
        price = float(row.get("dph_total") or 0)
    tags = {**_row_tags(row), TAG_FLEET: label.fleet, TAG_POOL: label.pool}
    if label.plan:
        tags[TAG_PLAN] = label.plan
    return Instance(
        id=str(row["id"]),
        fleet=label.fleet,
        pool=pool,
        state=state,
        accelerator=acc,
        gpus=gpus,
        price_per_hour=round(price, 6),
        launched_at=float(row.get("start_date") or now),
        ended_at=(stopped_since if stopped_since is not None else now) if reason else None,
        reason=reason,
        tags=tags,
        address=str(row.get("public_ipaddr") or "").strip(),
    )


def billed_rate(row: Mapping[str, Any], now: float) -> BilledRate:
    """What one listed row bills (see the module doc); a row without a usable ``dph_total`` or
    ``is_bid`` is a malformed answer, never a guessed rate."""
    price, is_bid = row.get("dph_total"), row.get("is_bid")
    if (
        isinstance(price, bool)
        or not isinstance(price, (int, float))
        or not math.isfinite(price)
        or price < 0
        or not isinstance(is_bid, bool)
    ):
        raise malformed(
            "vast",
            f"list instance {row.get('id')}",
            dict(row),
            detail="dph_total or is_bid missing or not a number/boolean",
        )
    return BilledRate(
        per_hour=round(float(price), 6), source="instance", rental="bid" if is_bid else "on-demand", at=now
    )
