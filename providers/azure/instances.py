"""An Azure VM (ARM wire format, with its instance view) as our ``Instance``.

States: provisioning ``Creating``/``Updating`` -> pending; ``Succeeded`` and powered on (or no
power state yet) -> running; a Spot VM ``deallocated``/``stopped`` by Azure (evictionPolicy
Deallocate keeps an evicted VM) -> stopped with ``reason="evicted"``: interrupted, no longer
computing, still billing its OS disk (priced :data:`OS_DISK_PER_HOUR`) until ``terminate`` deletes
it (``fleet down`` does), and ended at the time Azure gives in the instance view
(:func:`status_time`), else at ``now``. With evictionPolicy Delete the VM leaves the listing
(``providers.azure.activity`` dates its end). ``Deleting``/``Failed`` -> terminated. The pool comes
from the ``spotfleet:pool`` tag, the price from ``prices`` (zone-free pool id -> accelerator, GPUs,
price: the snapshot), else 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fleet.model import TAG_FLEET, TAG_POOL, Instance, InstanceState, PoolKey

#: What a deallocated VM still bills per hour: its OS disk, a 30 GiB Premium SSD (P4) at list price.
OS_DISK_PER_HOUR = 0.0072
EVICTED = "evicted"


def power_state(vm: Mapping[str, Any]) -> str:
    """``running``, ``deallocated``... from the instance view; "" when the VM has none."""
    view = (vm.get("properties") or {}).get("instanceView") or {}
    for status in view.get("statuses") or []:
        code = str(status.get("code") or "")
        if code.startswith("PowerState/"):
            return code.split("/", 1)[1]
    return ""


def status_time(vm: Mapping[str, Any]) -> float | None:
    """When the VM reached its power state, as the instance view tells: the ``time`` of the
    ``PowerState/...`` status where it has one, else of the ``ProvisioningState/...`` status (the
    end of the last operation, such as the deallocation); None when neither is dated."""
    view = (vm.get("properties") or {}).get("instanceView") or {}
    stamps = {str(s.get("code") or "").split("/", 1)[0]: s.get("time") for s in view.get("statuses") or []}
    for kind in ("PowerState", "ProvisioningState"):
        when = parse_time(stamps.get(kind))
        if when is not None:
            return when
    return None


def state_of(vm: Mapping[str, Any]) -> tuple[InstanceState, str]:
    props = vm.get("properties") or {}
    prov = str(props.get("provisioningState") or "")
    power = power_state(vm)
    if prov in ("Deleting", "Failed"):
        return InstanceState.TERMINATED, prov.lower()
    if power in ("deallocated", "deallocating", "stopped") and props.get("priority") == "Spot":
        return InstanceState.STOPPED, EVICTED
    if power in ("deallocated", "stopped"):
        return InstanceState.STOPPED, power
    if prov in ("Creating", "Updating") or power == "starting":
        return InstanceState.PENDING, ""
    return InstanceState.RUNNING, ""


def parse_time(text: Any) -> float | None:
    """Epoch seconds of an ARM timestamp; None when absent or unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _epoch(text: Any, default: float) -> float:
    when = parse_time(text)
    return default if when is None else when


def to_instance(vm: Mapping[str, Any], now: float, prices: Mapping[str, tuple[str, int, float]]) -> Instance | None:
    """The Instance for a VM with spotfleet tags; None for a VM without them."""
    tags = dict(vm.get("tags") or {})
    fleet, pool_id = tags.get(TAG_FLEET), tags.get(TAG_POOL)
    if not fleet or not pool_id:
        return None
    try:
        pool = PoolKey.from_id(pool_id)
    except (ValueError, TypeError):
        return None
    state, reason = state_of(vm)
    accelerator, gpus, price = prices.get(pool.model_copy(update={"zone": ""}).id, ("", 1, 0.0))
    launched = _epoch((vm.get("properties") or {}).get("timeCreated"), now)
    ended = None if state.alive else now
    if reason == EVICTED:
        when = status_time(vm)
        ended, price = (when if when is not None else now), OS_DISK_PER_HOUR
    return Instance(
        id=str(vm["name"]),
        fleet=fleet,
        pool=pool,
        state=state,
        accelerator=accelerator or "GPU",
        gpus=gpus,
        price_per_hour=price,
        launched_at=launched,
        ended_at=ended,
        reason=reason,
        tags=tags,
    )
