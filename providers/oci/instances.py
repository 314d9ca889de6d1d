"""OCI instances as fleet instances, and the freeform tags that say which are ours (pure).

Every instance the adapter launches carries freeform tags naming the fleet, the pool, the launch
token and its slot (:func:`freeform_tags`). OCI tag keys may not hold a period or a space
(https://docs.oracle.com/iaas/Content/Tagging/Concepts/taggingoverview.htm), so the fleet's
``spotfleet:*`` tag names travel as ``spotfleet_*`` and are read back under their own names.
An instance without the fleet tag is foreign: never listed, never terminated.

States (``lifecycleState``): PROVISIONING/STARTING/MOVING -> pending, RUNNING/CREATING_IMAGE ->
running, STOPPING/STOPPED -> stopped, TERMINATING/TERMINATED -> ended (OCI keeps terminated
instances listed for a while; they are not the fleet's any more).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime

from fleet.model import TAG_FLEET, TAG_POOL, Instance, InstanceState, Market, PoolKey
from providers.oci.schemas import InstanceRow

PREFIX = "spotfleet:"
OCI_PREFIX = "spotfleet_"
TAG_TOKEN = "spotfleet:token"
TAG_SLOT = "spotfleet:slot"
TAG_PRICE = "spotfleet:price"

STATES = {
    "PROVISIONING": InstanceState.PENDING,
    "STARTING": InstanceState.PENDING,
    "MOVING": InstanceState.PENDING,
    "RUNNING": InstanceState.RUNNING,
    "CREATING_IMAGE": InstanceState.RUNNING,
    "STOPPING": InstanceState.STOPPED,
    "STOPPED": InstanceState.STOPPED,
    "TERMINATING": InstanceState.TERMINATED,
    "TERMINATED": InstanceState.TERMINATED,
}
ENDED = ("TERMINATING", "TERMINATED")


def to_oci_key(key: str) -> str:
    """A fleet tag name as an OCI freeform tag key (no period, space or colon)."""
    name = OCI_PREFIX + key[len(PREFIX) :] if key.startswith(PREFIX) else key
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:100]


def from_oci_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """OCI freeform tags with the fleet's own keys read back as ``spotfleet:*``."""
    return {PREFIX + k[len(OCI_PREFIX) :] if k.startswith(OCI_PREFIX) else k: v for k, v in tags.items()}


def token_tag(token: str) -> str:
    """The launch token as a short tag value (tokens may be long; a hash names it)."""
    return hashlib.sha256(token.encode()).hexdigest()[:32]


def retry_token(token: str, slot: int) -> str:
    """The ``opc-retry-token`` of one slot of a launch (at most 64 characters)."""
    return f"sf-{token_tag(token)}-{slot}"


def freeform_tags(tags: Mapping[str, str], token: str, slot: int, price: float) -> dict[str, str]:
    """The freeform tags of one launched instance: the request's tags, its token, slot and price."""
    out = {to_oci_key(k): str(v)[:256] for k, v in tags.items()}
    out[to_oci_key(TAG_TOKEN)] = token_tag(token)
    out[to_oci_key(TAG_SLOT)] = str(slot)
    out[to_oci_key(TAG_PRICE)] = f"{price:.6g}"
    return out


def fleet_of(row: InstanceRow) -> str:
    """The fleet an instance belongs to ("" when it is not spotfleet's)."""
    return (row.freeform_tags or {}).get(to_oci_key(TAG_FLEET), "")


def alive(row: InstanceRow) -> bool:
    return row.lifecycle_state not in ENDED


def slot_of(row: InstanceRow) -> int | None:
    value = (row.freeform_tags or {}).get(to_oci_key(TAG_SLOT), "")
    return int(value) if value.isdigit() else None


def epoch(text: str) -> float:
    """An RFC 3339 time (``2026-12-02T00:41:34.123Z``) in epoch seconds; 0 when unreadable."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def pool_of(row: InstanceRow, region: str) -> PoolKey:
    """The pool an instance runs in: its tag where it has one, else its shape, AD and market."""
    tagged = (row.freeform_tags or {}).get(to_oci_key(TAG_POOL), "")
    if tagged.count("/") == 4:
        try:
            return PoolKey.from_id(tagged)
        except ValueError:
            pass
    market = Market.SPOT if row.preemptible_instance_config is not None else Market.ON_DEMAND
    return PoolKey(provider="oci", region=region, zone=row.availability_domain, instance_type=row.shape, market=market)


def to_instance(row: InstanceRow, region: str, accelerator: str, gpus: int) -> Instance:
    """One of our instances as the fleet sees it (``accelerator``/``gpus`` from its shape)."""
    tags = from_oci_tags(row.freeform_tags or {})
    try:
        price = float(tags.get(TAG_PRICE, "0"))
    except ValueError:
        price = 0.0
    state = STATES.get(row.lifecycle_state, InstanceState.PENDING)
    return Instance(
        id=row.id,
        fleet=tags.get(TAG_FLEET, ""),
        pool=pool_of(row, region),
        state=state,
        accelerator=accelerator,
        gpus=gpus,
        price_per_hour=price,
        launched_at=epoch(row.time_created),
        tags={k: v for k, v in tags.items() if k not in (TAG_TOKEN, TAG_SLOT, TAG_PRICE)},
        reason="terminated" if state is InstanceState.TERMINATED else "",
    )
