"""The fleet's network in a region: a VNet with one subnet behind a network security group (NSG).

:func:`ensure_network` creates them once per fleet and region, tagged with the fleet: the NSG
``<vnet>-nsg`` holds no inbound rule but one allowing SSH (TCP 22) when the nodes get an SSH key,
so Azure's default rules (``DenyAllInBound`` after the VNet's own and the load balancer's traffic)
refuse the rest; the subnet is attached to it. A rerun finds both and rewrites only what differs
(an NSG with other rules, a subnet without the NSG), so a spec that adds a key opens SSH.
:func:`remove_network` deletes the fleet's VNet and NSG in a region (the VNet first: an NSG
attached to a subnet cannot go); anything without this fleet's tag is left alone, 404 is gone.
"""

from __future__ import annotations

import logging
from typing import Any

from fleet.errors import InstanceNotFoundError
from fleet.model import TAG_FLEET
from providers.azure.arm import Arm, wire
from providers.azure.launch import SUBNET, vnet_body, vnet_name

log = logging.getLogger(__name__)

SSH_RULE = {
    "name": "allow-ssh",
    "properties": {
        "protocol": "Tcp",
        "sourcePortRange": "*",
        "destinationPortRange": "22",
        "sourceAddressPrefix": "*",
        "destinationAddressPrefix": "*",
        "access": "Allow",
        "priority": 1000,
        "direction": "Inbound",
    },
}


def nsg_name(fleet: str, region: str) -> str:
    return f"{vnet_name(fleet, region)}-nsg"


def nsg_body(fleet: str, region: str, ssh: bool) -> dict[str, Any]:
    """The fleet's NSG in ``region`` (ARM wire format): SSH in when ``ssh``, nothing else."""
    return {"location": region, "tags": {TAG_FLEET: fleet}, "properties": {"securityRules": [SSH_RULE] if ssh else []}}


def subnet_vnet_body(fleet: str, region: str, nsg_id: str) -> dict[str, Any]:
    """The fleet's VNet with its subnet attached to the NSG ``nsg_id``."""
    body = vnet_body(fleet, region)
    for subnet in body["properties"]["subnets"]:
        subnet["properties"]["networkSecurityGroup"] = {"id": nsg_id}
    return body


def _rules(nsg: dict[str, Any]) -> list[tuple[str, ...]]:
    """The custom rules of an NSG, as comparable tuples (ARM adds ids and states to what we sent)."""
    keys = ("protocol", "destinationPortRange", "sourceAddressPrefix", "access", "priority", "direction")
    return sorted(
        tuple(str((r.get("properties") or {}).get(k)) for k in keys)
        for r in (nsg.get("properties") or {}).get("securityRules") or []
    )


def _get(arm: Arm, operations: Any, rg: str, name: str, what: str) -> dict[str, Any] | None:
    try:
        return wire(arm.call(lambda: operations.get(rg, name), f"find {what} {name}"))
    except InstanceNotFoundError:
        return None


def ensure_network(arm: Arm, rg: str, fleet: str, region: str, *, ssh: bool) -> str:
    """The subnet id of the fleet's network in ``region``, creating or correcting the NSG and VNet."""
    nets = arm.network
    name = nsg_name(fleet, region)
    want = nsg_body(fleet, region, ssh)
    nsg = _get(arm, nets.network_security_groups, rg, name, "network security group")
    if nsg is None or _rules(nsg) != _rules(want):
        nsg = wire(
            arm.call(
                lambda: nets.network_security_groups.begin_create_or_update(rg, name, want).result(),
                f"create network security group {name}",
            )
        )
    vname = vnet_name(fleet, region)
    vnet = _get(arm, nets.virtual_networks, rg, vname, "vnet")
    subnet = _subnet(vnet)
    attached = ((subnet or {}).get("properties") or {}).get("networkSecurityGroup") or {}
    if subnet is None or str(attached.get("id", "")).lower() != nsg["id"].lower():
        vnet = wire(
            arm.call(
                lambda: nets.virtual_networks.begin_create_or_update(
                    rg, vname, subnet_vnet_body(fleet, region, nsg["id"])
                ).result(),
                f"create vnet {vname}",
            )
        )
        subnet = _subnet(vnet)
    assert subnet is not None, f"vnet {vname} came back without subnet {SUBNET}"
    return str(subnet["id"])


def _subnet(vnet: dict[str, Any] | None) -> dict[str, Any] | None:
    return next((s for s in ((vnet or {}).get("properties") or {}).get("subnets") or [] if s["name"] == SUBNET), None)


def fleet_networks(arm: Arm, rg: str, fleet: str) -> dict[str, list[tuple[str, str]]]:
    """Region -> the (kind, name) of the VNets and NSGs in ``rg`` tagged with ``fleet``."""
    nets = arm.network
    out: dict[str, list[tuple[str, str]]] = {}
    for kind, operations in (("vnet", nets.virtual_networks), ("nsg", nets.network_security_groups)):
        try:
            found = arm.call(lambda: [wire(x) for x in operations.list(rg)], f"list {kind}s in {rg}")
        except InstanceNotFoundError:  # no resource group: nothing of ours
            return {}
        for item in found:
            if (item.get("tags") or {}).get(TAG_FLEET) == fleet:
                out.setdefault(str(item.get("location") or ""), []).append((kind, item["name"]))
    return out


def remove_network(arm: Arm, rg: str, fleet: str, items: list[tuple[str, str]]) -> list[str]:
    """Delete these (kind, name) network resources of ``fleet``, VNets before NSGs, checking the fleet
    tag on each first; returns the names deleted (or already gone)."""
    nets = arm.network
    done = []
    for kind, name in sorted(items, key=lambda x: x[0] != "vnet"):
        operations = nets.virtual_networks if kind == "vnet" else nets.network_security_groups
        found = _get(arm, operations, rg, name, kind)
        if found is not None and (found.get("tags") or {}).get(TAG_FLEET) != fleet:
            log.warning("azure: not deleting %s %s: it does not carry fleet %s's tag", kind, name, fleet)
            continue
        if found is not None:
            try:
                arm.call(lambda: operations.begin_delete(rg, name).result(), f"delete {kind} {name}")
            except InstanceNotFoundError:
                pass
        done.append(name)
    return done
