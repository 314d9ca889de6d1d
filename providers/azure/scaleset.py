"""What a scale-set launch sends to ARM, and how its VMs map back to pools. Pure: no I/O.

One Flexible virtual machine scale set per fleet and region (``providers.azure.launch_mode:
scale-set``), named :func:`set_name` from the fleet and region, so every process finds the same
one. The set is regional (no zones, ``platformFaultDomainCount: 1``), so in this mode pools are
regional too (:func:`regional`): a VM made by the set belongs to pool
``azure/<region>/-/<size>/<spot|on-demand>`` by its size and priority (:func:`pool_of`).

:func:`set_body` is the whole set (ARM wire format): ``sku: {name: Mix, capacity}``, a
``priorityMixPolicy`` whose ``baseRegularPriorityCount`` is the Regular (on-demand) VMs wanted and
``regularPriorityPercentageAboveBase: 0`` (everything above the base is Spot), Spot
``evictionPolicy: Delete`` with ``billingProfile.maxPrice``, and a ``skuProfile`` listing the
region's sizes with ``allocationStrategy: Prioritized``: the size being launched ranks first, the
others follow as fallbacks when it has no capacity. The set carries the request's tags (not its
pool's: each VM gets the pool its size and priority give) and
``spotfleet:launches``, the hashes of the launch tokens it was grown for (the newest
:data:`LEDGER_SIZE`), so a repeated request is recognised in any process.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from fleet.bootstrap import render_base64
from fleet.model import TAG_FLEET, TAG_POOL, TAG_ROLE, LaunchRequest, Market, Offer, PoolKey
from providers.azure.launch import ADMIN_USER, identity_block, image_reference, linux_config, node_boot

TAG_LAUNCHES = "spotfleet:launches"
LEDGER_SIZE = 24
#: The network API version Flexible orchestration requires for NICs the set creates.
NETWORK_API_VERSION = "2020-11-01"


def _hash(text: str, n: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def set_name(fleet: str, region: str) -> str:
    """The fleet's scale set in ``region`` (at most 64 characters, stable across processes)."""
    slug = re.sub(r"[^a-z0-9-]+", "-", fleet.lower()).strip("-")[:30] or "fleet"
    return f"sf-{slug}-{region}-{_hash(fleet, 6)}"[:64]


def set_ref(vm: Mapping[str, Any]) -> str:
    """The id of the scale set a VM belongs to (lower case), or ""."""
    props = vm.get("properties") or {}
    return str((props.get("virtualMachineScaleSet") or {}).get("id") or "").lower()


def pool_of(vm: Mapping[str, Any]) -> PoolKey:
    """The (regional) pool a scale-set VM belongs to, from its location, size and priority."""
    props = vm.get("properties") or {}
    market = Market.SPOT if props.get("priority") in ("Spot", "Low") else Market.ON_DEMAND
    return PoolKey(
        provider="azure",
        region=str(vm.get("location") or ""),
        zone="",
        instance_type=str((props.get("hardwareProfile") or {}).get("vmSize") or ""),
        market=market,
    )


def member_tags(vm: Mapping[str, Any], set_tags: Mapping[str, str]) -> dict[str, str]:
    """The tags a VM of a spotfleet scale set is listed with: the set's tags, the VM's own over them,
    and always the pool its size and priority give (:func:`pool_of`). Whether a Flexible set copies
    its tags onto the VMs it makes is not documented either way, so nothing here depends on it: a
    copied ledger or a stale pool tag on the VM is ignored, and the pool never comes from a tag."""
    own = {k: v for k, v in dict(vm.get("tags") or {}).items() if k not in (TAG_LAUNCHES, TAG_POOL)}
    base = {k: v for k, v in set_tags.items() if k not in (TAG_LAUNCHES, TAG_POOL)}
    return {**base, **own, TAG_POOL: pool_of(vm).id}


def ledger(vmss: Mapping[str, Any] | None) -> list[str]:
    return str(((vmss or {}).get("tags") or {}).get(TAG_LAUNCHES) or "").split()


def token_mark(token: str) -> str:
    return _hash(token, 8)


def regional(offers: Iterable[Offer]) -> list[Offer]:
    """Azure offers with their zones folded into one regional pool per region, size and market
    (the first offer of each, in the given order, stands for it)."""
    out: dict[str, Offer] = {}
    for offer in offers:
        if offer.pool.provider != "azure":
            continue
        pool = offer.pool.model_copy(update={"zone": ""})
        out.setdefault(pool.id, offer.model_copy(update={"pool": pool}))
    return list(out.values())


def set_body(
    request: LaunchRequest,
    sizes: list[str],
    subnet_id: str,
    *,
    capacity: int,
    base_regular: int,
    max_price: float,
    marks: list[str],
    ssh_key: str,
    eviction_policy: str = "Delete",
    identity: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The fleet's scale set in the request's region (ARM wire format), grown for ``request``.

    ``sizes``: the region's VM sizes, the request's first. ``capacity``: the VMs the set must
    hold; ``base_regular``: how many of them are Regular; ``marks``: the launch ledger; ``ssh_key``:
    the admin user's public key (required: ``providers.azure.launch.linux_config``);
    ``eviction_policy``: its Spot VMs' (Delete or Deallocate); ``identity`` (resource id, client
    id): the node identity every VM carries, named to the node as ``$AZURE_CLIENT_ID``."""
    pool = request.offer.pool
    tags = {
        **{k: v for k, v in request.tags.items() if k not in (TAG_POOL, TAG_ROLE)},
        TAG_FLEET: request.fleet,
        TAG_LAUNCHES: " ".join(marks[-LEDGER_SIZE:]),
    }
    nic = {
        "name": "nic",
        "properties": {
            "primary": True,
            "deleteOption": "Delete",
            "ipConfigurations": [{"name": "ipconfig1", "properties": {"subnet": {"id": subnet_id}}}],
        },
    }
    profile = {
        "osProfile": {
            "computerNamePrefix": f"sf{_hash(request.fleet, 6)}",
            "adminUsername": ADMIN_USER,
            "customData": render_base64(node_boot(request, identity)),
            "linuxConfiguration": linux_config(ssh_key),
        },
        "storageProfile": {
            "imageReference": image_reference(request.node.image),
            "osDisk": {
                "createOption": "FromImage",
                "deleteOption": "Delete",
                "managedDisk": {"storageAccountType": "Premium_LRS"},
            },
        },
        "networkProfile": {"networkApiVersion": NETWORK_API_VERSION, "networkInterfaceConfigurations": [nic]},
        "priority": "Spot",
        "evictionPolicy": eviction_policy,
        "billingProfile": {"maxPrice": max_price},
    }
    body: dict[str, Any] = {
        "location": pool.region,
        "tags": tags,
        "sku": {"name": "Mix", "capacity": capacity},
        "properties": {
            "orchestrationMode": "Flexible",
            "platformFaultDomainCount": 1,
            "singlePlacementGroup": False,
            "priorityMixPolicy": {"baseRegularPriorityCount": base_regular, "regularPriorityPercentageAboveBase": 0},
            "skuProfile": {
                "vmSizes": [{"name": s, "rank": i} for i, s in enumerate(sizes)],
                "allocationStrategy": "Prioritized",
            },
            "virtualMachineProfile": profile,
        },
    }
    if identity is not None:
        body["identity"] = identity_block(identity[0])
    return body
