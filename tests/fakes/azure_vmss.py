"""Flexible virtual machine scale sets for the fake ARM server (tests/fakes/azure_arm.py dispatches here).

Modelled on the documented ARM behaviour of ``Microsoft.Compute/virtualMachineScaleSets``
(api-version 2024-07-01 and later, as azure-mgmt-compute 39 sends it):

* ``PUT`` creates or updates a set and answers 201 (created) or 200 (updated) with
  ``provisioningState: Updating`` and an ``Azure-AsyncOperation`` URL; ``GET`` one set, ``GET``
  the resource group's list, ``DELETE`` answers 202 + ``Location`` (a Flexible set's VMs go with
  it) or 204 when there is nothing to delete.
* Only ``orchestrationMode: Flexible`` is modelled; it needs ``platformFaultDomainCount``.
  A ``skuProfile`` needs ``sku.name: Mix``; a ``priorityMixPolicy`` needs the Flexible mode and
  ``virtualMachineProfile.priority: Spot``. A violation is a 400 ``InvalidParameter`` with its
  ``target``, as ARM answers it.
* After a PUT the set holds ``sku.capacity`` VMs: missing ones are created as VMs of the resource
  group (``<set>_<8 hex>``, ``properties.virtualMachineScaleSet.id`` naming the set, as Flexible
  orchestration lists them; they carry no tags of their own unless the fake was reset with
  ``vmss_tags_propagate``, when each gets a copy of the set's tags at creation: Azure documents
  neither, so the adapter must work both ways).
* The VM profile meets the same refusals as a single VM (image, Linux sign-in: ``azure_arm.os_refusal``).
  Each new VM is ``Regular`` while the set has fewer Regular VMs than ``baseRegularPriorityCount``,
  then Regular for ``regularPriorityPercentageAboveBase`` percent of those above the base, else
  ``Spot``. Its size is the first of ``skuProfile.vmSizes`` (by ``rank`` for ``Prioritized``, in
  the listed order otherwise) with room left in the capacity the test set for
  ``location/size/priority`` (the same table individual VMs draw from). When no size has room the
  VMs that fit are made and the operation fails with ``AllocationFailed`` (the set keeps the
  capacity it was asked for; no VM is left in ``Failed`` state). A capacity below the number of
  VMs deletes the newest. The VMs turn ``Succeeded`` / running when the operation is polled done.
* Deleting one VM of a Flexible set (``DELETE .../virtualMachines/<name>``) removes it and
  lowers the set's capacity by one; nothing else changes.

Faults (``/_control/faults``) aimed at ``vmss``, ``*`` or ``<location>/<size>/<priority>`` for one
of a set's sizes hit the set's next PUT (a ``capacity`` fault fails its scale-out, making nothing).
Test lever (``POST /_control/vmss_foreign``): a set without spotfleet tags, with ``count`` VMs.
Run the whole fake alone: ``python tests/fakes/azure_arm.py --port 8443``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

SUBSCRIPTION = "00000000-0000-0000-0000-00000000f1ee"
KIND = "microsoft.compute/virtualmachinescalesets"


def _set_id(rg: str, name: str) -> str:
    return (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/{name}"
    )


def members(st: Any, rg: str, name: str) -> list[tuple[tuple[str, str], dict[str, Any]]]:
    """The VMs of set ``rg/name`` (oldest first)."""
    sid = _set_id(rg, name).lower()
    return [
        (k, v)
        for k, v in st.vms.items()
        if str((v["properties"].get("virtualMachineScaleSet") or {}).get("id") or "").lower() == sid
    ]


def _invalid(h: Any, target: str, message: str) -> None:
    h._send(400, {"error": {"code": "InvalidParameter", "message": message, "target": target}})


def _validate(h: Any, body: dict[str, Any]) -> bool:
    props = body.get("properties") or {}
    profile = props.get("virtualMachineProfile") or {}
    if props.get("orchestrationMode") != "Flexible":
        _invalid(h, "orchestrationMode", "This fake models only scale sets with orchestrationMode 'Flexible'.")
        return False
    if props.get("platformFaultDomainCount") is None:
        _invalid(
            h,
            "platformFaultDomainCount",
            "Parameter 'platformFaultDomainCount' is required for a virtual "
            "machine scale set with orchestration mode 'Flexible'.",
        )
        return False
    if props.get("skuProfile") and (body.get("sku") or {}).get("name") != "Mix":
        _invalid(h, "sku.name", "The value of parameter 'sku.name' must be 'Mix' when 'skuProfile' is specified.")
        return False
    if not (props.get("skuProfile") or {}).get("vmSizes") and not (body.get("sku") or {}).get("name"):
        _invalid(h, "sku.name", "Required parameter 'sku.name' is missing (null).")
        return False
    if props.get("priorityMixPolicy") and profile.get("priority") != "Spot":
        _invalid(
            h,
            "priorityMixPolicy",
            "'priorityMixPolicy' can only be specified when the virtual machine profile's priority is 'Spot'.",
        )
        return False
    return True


def _sizes(body: dict[str, Any]) -> list[str]:
    sku_profile = (body.get("properties") or {}).get("skuProfile") or {}
    sizes = list(sku_profile.get("vmSizes") or [])
    if sku_profile.get("allocationStrategy") == "Prioritized":
        sizes.sort(key=lambda s: s.get("rank", 0))
    return [s["name"] for s in sizes] or [(body.get("sku") or {}).get("name", "")]


def _new_priority(vms: list[dict[str, Any]], mix: dict[str, Any]) -> str:
    regular = sum(1 for v in vms if v["properties"].get("priority") == "Regular")
    base = int(mix.get("baseRegularPriorityCount") or 0)
    if regular < base:
        return "Regular"
    above, regular_above = len(vms) - base, regular - base
    pct = int(mix.get("regularPriorityPercentageAboveBase") or 0)
    return "Regular" if regular_above < (above + 1) * pct / 100.0 else "Spot"


def _scale(h: Any, rg: str, vmss: dict[str, Any]) -> tuple[list[tuple[str, str]], dict[str, Any] | None]:
    """Bring the set to its capacity; the keys of the VMs made and the allocation error, if any."""
    st = h.st
    have = members(st, rg, vmss["name"])
    want = int(vmss["sku"].get("capacity") or 0)
    for key, _ in reversed(have[want:]):  # scale in: newest first
        h._remove_vm(key)
    props = vmss["properties"]
    profile = props.get("virtualMachineProfile") or {}
    mix = props.get("priorityMixPolicy") or {}
    vms = [v for _, v in have[:want]]
    made: list[tuple[str, str]] = []
    error = None
    for _ in range(want - len(vms)):
        priority = _new_priority(vms, mix) if mix else profile.get("priority") or "Regular"
        size = next((s for s in _sizes(vmss) if h.room(vmss["location"], s, priority) > 0), None)
        if size is None:
            error = {
                "code": "AllocationFailed",
                "message": "Allocation failed. We do not have sufficient capacity "
                f"for the requested VM sizes {', '.join(_sizes(vmss))} with priority {priority} in this region. "
                "Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance",
            }
            break
        name = f"{vmss['name']}_{uuid.uuid4().hex[:8]}"
        vm_props: dict[str, Any] = {
            "hardwareProfile": {"vmSize": size},
            "priority": priority,
            "virtualMachineScaleSet": {"id": vmss["id"]},
            "vmId": str(uuid.uuid4()),
            "provisioningState": "Creating",
            "timeCreated": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
            "storageProfile": profile.get("storageProfile") or {},
            "networkProfile": {
                "networkInterfaceConfigurations": (profile.get("networkProfile") or {}).get(
                    "networkInterfaceConfigurations"
                )
                or []
            },
            "osProfile": {
                **(profile.get("osProfile") or {}),
                "computerName": f"{(profile.get('osProfile') or {}).get('computerNamePrefix', '')}"
                f"{uuid.uuid4().hex[:6]}",
            },
        }
        if priority == "Spot":
            vm_props.update(
                evictionPolicy=profile.get("evictionPolicy") or "Deallocate",
                billingProfile=profile.get("billingProfile") or {"maxPrice": -1},
            )
        vm = {
            "id": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{rg}/providers/Microsoft.Compute/"
            f"virtualMachines/{name}",
            "name": name,
            "type": "Microsoft.Compute/virtualMachines",
            "location": vmss["location"],
            "tags": dict(vmss.get("tags") or {}) if st.vmss_tags_propagate else {},
            "zones": vmss.get("zones") or None,
            "properties": vm_props,
            **({"identity": vmss["identity"]} if vmss.get("identity") else {}),
        }
        st.vms[(rg, name.lower())] = vm
        vms.append(vm)
        made.append((rg, name.lower()))
    return made, error


def _view(vmss: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in vmss.items() if not k.startswith("_")}


def route(h: Any, method: str, rg: str, orig: list[str], body: dict[str, Any]) -> None:
    """``.../resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachineScaleSets[/<name>]``."""
    st = h.st
    if len(orig) == 5:
        if method != "GET":
            return h._error(405, "MethodNotAllowed", method)
        return h._send(200, {"value": [_view(v) for (g, _), v in sorted(st.vmss.items()) if g == rg]})
    name = orig[5]
    key = (rg, name.lower())
    vmss = st.vmss.get(key)
    if method == "GET":
        if vmss is None:
            return h._error(
                404,
                "ResourceNotFound",
                f"The Resource 'Microsoft.Compute/virtualMachineScaleSets/{name}' "
                f"under resource group '{orig[1]}' was not found.",
            )
        return h._send(200, _view(vmss))
    if method == "DELETE":
        if vmss is None:
            return h._send(204)
        for vm_key, _ in members(st, rg, vmss["name"]):
            h._remove_vm(vm_key)
        del st.vmss[key]
        st.deleted.append(vmss["id"])
        return h._send(202, None, {"Location": h._op(vmss["location"], {}), "Retry-After": "0"})
    if method != "PUT":
        return h._error(405, "MethodNotAllowed", method)
    aimed = {"vmss", "*"} | {
        f"{body.get('location', '')}/{s}/{p}".lower() for s in _sizes(body) for p in ("spot", "regular")
    }
    fault = next((f for f in st.faults if f["count"] > 0 and f["target"] in aimed), None)
    if fault and fault["kind"] != "capacity":
        fault["count"] -= 1
        status, code, message = h.fault(fault["kind"])
        return h._error(
            status,
            code,
            message.format(location=body.get("location", "")),
            {"Retry-After": str(st.retry_after)} if status == 429 else None,
        )
    if not _validate(h, body):
        return None
    refused = h.profile_refusal((body.get("properties") or {}).get("virtualMachineProfile") or {})
    if refused:
        return h._error(*refused)
    identity, problem = h.identity_of(body)
    if problem:
        return h._error(400, "FailedIdentityOperation", problem)
    created = vmss is None
    props = dict(body.get("properties") or {})
    old = vmss or {}
    vmss = {
        "id": _set_id(orig[1], name),
        "name": name,
        "type": "Microsoft.Compute/virtualMachineScaleSets",
        "location": body.get("location", ""),
        "tags": body.get("tags") or {},
        "sku": dict(body.get("sku") or {}),
        "zones": body.get("zones") or None,
        **({"identity": identity} if identity else {}),
        "properties": {
            **props,
            "provisioningState": "Updating",
            "uniqueId": (old.get("properties") or {}).get("uniqueId") or str(uuid.uuid4()),
            "timeCreated": (old.get("properties") or {}).get("timeCreated")
            or time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        },
    }
    st.vmss[key] = vmss
    if fault is not None:  # a "capacity" fault: the scale-out fails and makes nothing
        fault["count"] -= 1
        made, error = (
            [],
            {
                "code": "AllocationFailed",
                "message": "Allocation failed. We do not have sufficient "
                "capacity for the requested VM sizes in this region.",
            },
        )
    else:
        made, error = _scale(h, rg, vmss)
    op = h._op(vmss["location"], {"vmss": key, "made": made, "error": error})
    return h._send(201 if created else 200, _view(vmss), {"Azure-AsyncOperation": op})


def poll(h: Any, oid: str, op: dict[str, Any]) -> None:
    """An operation on a set: InProgress once, then its VMs run and the set is Succeeded (or Failed)."""
    st = h.st
    if op["polls"] == 1:
        return h._send(200, {"name": oid, "status": "InProgress"})
    vmss = st.vmss.get(op["vmss"])
    for key in op.get("made") or []:
        vm = st.vms.get(key)
        if vm is not None:
            vm["properties"]["provisioningState"] = "Succeeded"
            vm["_power"] = "running"
    if vmss is not None:
        vmss["properties"]["provisioningState"] = "Failed" if op.get("error") else "Succeeded"
    if op.get("error"):
        return h._send(200, {"name": oid, "status": "Failed", "error": op["error"]})
    return h._send(200, {"name": oid, "status": "Succeeded"})


def member_removed(st: Any, vm: dict[str, Any]) -> None:
    """A deleted VM of a Flexible set lowers the set's capacity by one."""
    ref = str(((vm.get("properties") or {}).get("virtualMachineScaleSet") or {}).get("id") or "")
    for vmss in st.vmss.values():
        if vmss["id"].lower() == ref.lower():
            vmss["sku"]["capacity"] = max(0, int(vmss["sku"].get("capacity") or 0) - 1)


def control_foreign(h: Any, body: dict[str, Any]) -> None:
    """A set (and ``count`` VMs) that spotfleet did not make: no spotfleet tags."""
    st = h.st
    rg = body.get("resource_group", "spotfleet").lower()
    st.groups.setdefault(
        rg,
        {
            "id": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{rg}",
            "name": rg,
            "location": body["location"],
            "tags": {},
            "properties": {},
        },
    )
    name = body.get("name") or f"theirs-set-{next(st.ids)}"
    vmss = {
        "id": _set_id(rg, name),
        "name": name,
        "type": "Microsoft.Compute/virtualMachineScaleSets",
        "location": body["location"],
        "tags": dict(body.get("tags") or {}),
        "sku": {"name": body["size"], "capacity": int(body.get("count", 1))},
        "zones": None,
        "properties": {
            "orchestrationMode": "Flexible",
            "platformFaultDomainCount": 1,
            "provisioningState": "Succeeded",
            "virtualMachineProfile": {"priority": body.get("priority", "Spot"), "evictionPolicy": "Delete"},
        },
    }
    st.vmss[(rg, name.lower())] = vmss
    made, _ = _scale(h, rg, vmss)
    for key in made:
        st.vms[key]["properties"]["provisioningState"] = "Succeeded"
        st.vms[key]["_power"] = "running"
    return h._send(200, {"name": name, "vms": [st.vms[k]["name"] for k in made]})
