"""An Azure VM (ARM wire format, with its instance view) as our ``Instance``.

States: provisioning ``Creating``/``Updating`` -> pending; ``Succeeded`` and powered on (or no
power state yet) -> running; a Spot VM ``deallocated``/``stopped`` by Azure -> preempted with
``reason="evicted"`` (evictionPolicy Deallocate keeps the VM; with Delete it leaves the listing);
``Deleting``/``Failed`` -> terminated. The pool comes from the ``spotfleet:pool`` tag, the price
from ``prices`` (zone-free pool id -> accelerator, GPUs, price: the snapshot), else 0.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

from fleet.model import TAG_FLEET, TAG_POOL, Instance, InstanceState, PoolKey


def power_state(vm: Mapping[str, Any]) -> str:
    """``running``, ``deallocated``... from the instance view; "" when the VM has none."""
    view = (vm.get("properties") or {}).get("instanceView") or {}
    for status in view.get("statuses") or []:
        code = str(status.get("code") or "")
        if code.startswith("PowerState/"):
            return code.split("/", 1)[1]
    return ""


def state_of(vm: Mapping[str, Any]) -> tuple[InstanceState, str]:
    props = vm.get("properties") or {}
    prov = str(props.get("provisioningState") or "")
    power = power_state(vm)
    if prov in ("Deleting", "Failed"):
        return InstanceState.TERMINATED, prov.lower()
    if power in ("deallocated", "deallocating", "stopped") and props.get("priority") == "Spot":
        return InstanceState.PREEMPTED, "evicted"
    if power in ("deallocated", "stopped"):
        return InstanceState.STOPPED, power
    if prov in ("Creating", "Updating") or power == "starting":
        return InstanceState.PENDING, ""
    return InstanceState.RUNNING, ""


def _epoch(text: str | None, default: float) -> float:
    if not text:
        return default
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return default


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
    return Instance(id=str(vm["name"]), fleet=fleet, pool=pool, state=state, accelerator=accelerator or "GPU",
                    gpus=gpus, price_per_hour=price, launched_at=launched,
                    ended_at=now if not state.alive else None, reason=reason, tags=tags)
