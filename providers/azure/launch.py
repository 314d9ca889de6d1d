"""What a launch sends to ARM: names, tags, the per-fleet network, the NIC and the Spot VM.

Names are deterministic: VM ``i`` of a launch token is ``sf-<hash(token)>-<i>`` and its NIC
``<vm>-nic``, so a rerun of the same request finds what an earlier (perhaps killed) run made and
never creates a second copy. Every resource carries the fleet tags plus ``spotfleet:token``
(the launch token) and ``spotfleet:request`` (a hash of what was asked: a token reused for another
request is refused). The VNet ``spotfleet-<fleet>-<region>`` with one subnet is created once per
fleet and region. The VM's NIC and OS disk have ``deleteOption: Delete``, so they go with it
(whether our delete or an eviction with evictionPolicy Delete removes it).
Custom data is the shared node bootstrap (``fleet.bootstrap``). Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any

from fleet.bootstrap import NodeBoot, boot_for, render_base64
from fleet.model import TAG_FLEET, LaunchRequest, Market, fleet_tags, stable_hash

TAG_TOKEN = "spotfleet:token"
TAG_REQUEST = "spotfleet:request"
ADDRESS_SPACE = "10.42.0.0/16"
SUBNET = "nodes"
SUBNET_PREFIX = "10.42.0.0/20"
ADMIN_USER = "spotfleet"
#: The default image: Microsoft's Ubuntu-HPC 22.04 (Gen2), which ships the NVIDIA GPU driver, CUDA,
#: NCCL and the InfiniBand (OFED) stack, so a node runs a CUDA job without installing a driver
#: (https://github.com/Azure/azhpc-images; the image named by Azure's GPU guides). ``node.image``
#: replaces it (:func:`image_reference`).
IMAGE = {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204", "version": "latest"}


def _slug(text: str, n: int) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:n] or "fleet"


def vm_names(token: str, count: int) -> list[str]:
    """The VM names of a launch token (stable across processes)."""
    h = hashlib.sha256(token.encode()).hexdigest()[:12]
    return [f"sf-{h}-{i}" for i in range(count)]


def nic_name(vm: str) -> str:
    return f"{vm}-nic"


def vnet_name(fleet: str, region: str) -> str:
    return f"spotfleet-{_slug(fleet, 40)}-{region}"


def request_hash(request: LaunchRequest) -> str:
    """What a token promises: the pool and the count (a reused token must ask the same)."""
    return stable_hash([request.fleet, request.offer.pool.id, request.count])


def tags_for(request: LaunchRequest) -> dict[str, str]:
    """The request's tags, with the fleet/pool tags it may have forgotten, the token and request hash."""
    return {
        **request.tags,
        **fleet_tags(request.fleet, request.offer.pool),
        TAG_TOKEN: request.token,
        TAG_REQUEST: request_hash(request),
    }


def vnet_body(fleet: str, region: str) -> dict[str, Any]:
    """The fleet's VNet in ``region`` (ARM wire format), one subnet, tagged with the fleet."""
    return {
        "location": region,
        "tags": {TAG_FLEET: fleet},
        "properties": {
            "addressSpace": {"addressPrefixes": [ADDRESS_SPACE]},
            "subnets": [{"name": SUBNET, "properties": {"addressPrefix": SUBNET_PREFIX}}],
        },
    }


def nic_body(region: str, subnet_id: str, tags: dict[str, str]) -> dict[str, Any]:
    """A NIC with a private address only (no public IP: nothing to clean up but the NIC)."""
    return {
        "location": region,
        "tags": tags,
        "properties": {
            "ipConfigurations": [
                {
                    "name": "ipconfig1",
                    "properties": {"subnet": {"id": subnet_id}, "privateIPAllocationMethod": "Dynamic"},
                }
            ]
        },
    }


def node_boot(request: LaunchRequest, identity: tuple[str, str] | None = None) -> NodeBoot:
    """The node bootstrap of a launch; with a node identity (resource id, client id), the node's
    ``$AZURE_CLIENT_ID`` names it, so DefaultAzureCredential picks that managed identity."""
    boot = boot_for("azure", request)
    if identity is None:
        return boot
    return dataclasses.replace(boot, env={**boot.env, "AZURE_CLIENT_ID": identity[1]})


def identity_block(identity_id: str) -> dict[str, Any]:
    """A VM's (or scale set's) ``identity``: the one user-assigned identity ``identity_id``."""
    return {"type": "UserAssigned", "userAssignedIdentities": {identity_id: {}}}


def vm_body(
    request: LaunchRequest,
    name: str,
    nic_id: str,
    tags: dict[str, str],
    *,
    ssh_key: str,
    eviction_policy: str = "Delete",
    identity: tuple[str, str] | None = None,
    placement_group: str = "",
) -> dict[str, Any]:
    """The VM (ARM wire format): Spot with ``eviction_policy`` (Delete, or Deallocate: an evicted
    VM is kept, deallocated) and maxPrice (the cap, or -1 = up to the on-demand price), or Regular
    for an on-demand pool. ``ssh_key``: the public key the admin user signs in with (required:
    :func:`linux_config`). ``identity`` (resource id, client id) attaches the node identity and
    names it to the node as ``$AZURE_CLIENT_ID``. ``placement_group``: the id of the proximity
    placement group the VM joins (``providers.azure.interconnect``), "" for none."""
    pool = request.offer.pool
    props: dict[str, Any] = {
        "hardwareProfile": {"vmSize": pool.instance_type},
        "storageProfile": {
            "imageReference": image_reference(request.node.image),
            "osDisk": {
                "createOption": "FromImage",
                "deleteOption": "Delete",
                "managedDisk": {"storageAccountType": "Premium_LRS"},
            },
        },
        "osProfile": {
            "computerName": name,
            "adminUsername": ADMIN_USER,
            "customData": render_base64(node_boot(request, identity)),
            "linuxConfiguration": linux_config(ssh_key),
        },
        "networkProfile": {
            "networkInterfaces": [{"id": nic_id, "properties": {"primary": True, "deleteOption": "Delete"}}]
        },
    }
    if pool.market is Market.SPOT:
        props.update(
            priority="Spot",
            evictionPolicy=eviction_policy,
            billingProfile={"maxPrice": request.max_price if request.max_price is not None else -1},
        )
    else:
        props["priority"] = "Regular"
    if placement_group:
        props["proximityPlacementGroup"] = {"id": placement_group}
    body: dict[str, Any] = {"location": pool.region, "tags": tags, "properties": props}
    if identity is not None:
        body["identity"] = identity_block(identity[0])
    if pool.zone:
        body["zones"] = [pool.zone]
    return body


def linux_config(ssh_key: str) -> dict[str, Any]:
    """The ``linuxConfiguration`` of a node: password sign-in off and ``ssh_key`` for the admin user.
    Azure refuses a Linux VM with password sign-in off and no key (``InvalidParameter``), so an
    empty key is a ValueError here rather than a refused VM."""
    if not ssh_key.strip():
        raise ValueError("a Linux VM without a password needs an SSH public key")
    return {
        "disablePasswordAuthentication": True,
        "provisionVMAgent": True,
        "ssh": {"publicKeys": [{"path": f"/home/{ADMIN_USER}/.ssh/authorized_keys", "keyData": ssh_key.strip()}]},
    }


def image_reference(image: str) -> dict[str, Any]:
    """The ``imageReference`` for ``node.image``: :data:`IMAGE` when empty, a marketplace URN
    ``publisher:offer:sku:version``, or the resource id of a managed image or a Compute Gallery
    image (version); anything else is a ValueError naming ``node.image``."""
    if not image:
        return dict(IMAGE)
    if image.startswith("/subscriptions/") and "/providers/Microsoft.Compute/" in image:
        return {"id": image}
    parts = image.split(":")
    if len(parts) == 4 and all(re.fullmatch(r"[A-Za-z0-9._-]+", p) for p in parts):
        return dict(zip(("publisher", "offer", "sku", "version"), parts))
    raise ValueError(
        f"node.image {image!r} is not an Azure image: write publisher:offer:sku:version "
        "(e.g. microsoft-dsvm:ubuntu-hpc:2204:latest) or the resource id of a managed or gallery image"
    )
