"""A small fake Azure Resource Manager for the Azure adapter's tests, driven by the real azure-mgmt clients.

Serves plain HTTP on 127.0.0.1 (the adapter drops the bearer-token policy for a loopback
endpoint). What it models, from the documented ARM behaviour:

* the Retail Prices API (``/api/retail/prices``: Linux/Windows, on-demand/Spot/Low Priority meters,
  ``$filter`` on region and size, pages of 3 through ``NextPageLink``);
* resource groups (GET/HEAD/PUT): a group's location is fixed at creation, so a PUT of an existing
  group with another location is 409 ``InvalidResourceGroupLocation`` ("Resource Groups - Create Or
  Update", https://learn.microsoft.com/rest/api/resources/resource-groups/create-or-update);
  Resource SKUs (``Microsoft.Compute/skus``), compute usages
  (``lowPriorityCores``, ``cores`` and one row per VM family, counting the VMs that exist);
* virtual networks, network security groups and network interfaces (PUT answers 201 +
  ``Azure-AsyncOperation``; a reference to a missing subnet or NSG is ``InvalidResourceReference``;
  an NSG lists Azure's ``defaultSecurityRules``; one still attached to a subnet cannot be deleted,
  ``InUseNetworkSecurityGroupCannotBeDeleted``; a VNet with NICs in its subnet neither);
* virtual machines: a Linux VM with password sign-in off needs an SSH key at
  ``/home/<adminUsername>/.ssh/authorized_keys`` that is SSH-2 RSA of 2048 bits or more or ED25519
  (else 400 ``InvalidParameter``, ARM's messages: :func:`os_refusal`), and a marketplace image the fake
  knows (:data:`IMAGES`; else 404 ``PlatformImageNotFound``); PUT answers 201 with ``provisioningState: Creating`` and an
  ``Azure-AsyncOperation`` URL that reports ``InProgress`` once, then ``Succeeded`` or ``Failed``
  with the ARM error (``AllocationFailed`` / ``ZonalAllocationFailed`` leave the VM in
  ``Failed`` state, as Azure does); DELETE answers 202 + ``Location``; a NIC still attached to a VM
  cannot be deleted (``NicInUse``); a VM's NICs with ``deleteOption: Delete`` go with it;
* proximity placement groups (``Microsoft.Compute/proximityPlacementGroups``: PUT, synchronous
  200/201, GET, list, DELETE; "Proximity Placement Groups",
  https://learn.microsoft.com/rest/api/compute/proximity-placement-groups): a group's location is
  fixed at creation (a PUT with another is 409 ``InvalidParameter``); a VM naming one in
  ``properties.proximityPlacementGroup.id`` needs it to exist (404 ``NotFound``) and to be in the
  VM's location (400 ``InvalidParameter``); its ``virtualMachines`` lists the VMs in it, and one
  that still holds VMs cannot be deleted (409 ``OperationNotAllowed``);
* Flexible virtual machine scale sets with ``priorityMixPolicy`` and a multi-size ``skuProfile``
  (``tests/fakes/azure_vmss.py``);
* synchronous refusals with real ARM error bodies: ``OperationNotAllowed`` (quota, 409),
  ``SkuNotAvailable`` (409), ``AuthorizationFailed`` (403), ``TooManyRequests`` (429 with
  ``Retry-After``), ``InternalServerError`` (500).

Test levers under ``/_control/``: ``reset`` (SKUs, capacity, quotas; ``vmss_tags_propagate``: a scale
set's VMs get its tags, which Azure does not document either way), ``capacity`` (per
``location/size/priority``), ``quota`` (a vCPU limit per ``location/usage name``: a creation over
``lowPriorityCores`` for Spot, or ``cores`` or the size's family for regular VMs, is refused with
``OperationNotAllowed``, as Azure refuses it), ``faults`` (the next N VM creations into a target, or N price queries
for target ``prices``, fail with a kind; a throttle names ``Retry-After: <retry_after>``, 1 s
unless reset says otherwise),
``group_race`` (the next PUT of missing group ``name`` finds
it made meanwhile in ``location``, as by another process), ``group_gate`` (a reset option: existence checks of a
missing group wait until that many are pending, at most 3 s, so concurrent callers all see it missing),
``malformed`` (``{"target": "vms", "variant", "count"}``: the "malformed 200" fault; the next
``count`` VM listings of a resource group answer 200 with a broken body, ``variant`` truncated,
html, empty (``{}``) or wrong-types (a mapping where the ``value`` list belongs), from
``tests/fakes/malformed.py``),
``foreign`` (VMs without spotfleet tags), ``vmss_foreign`` (a scale set without them), ``evict`` (as Azure evicts a Spot VM: by its
evictionPolicy, deleted or deallocated, at ``at`` epoch seconds or now), ``state`` (everything, as
JSON), ``calls``. ``POST .../virtualMachines/{vm}/simulateEviction`` (204) evicts the same way, at once.

The Activity Log (``Microsoft.Insights/eventtypes/management/values``, ``$filter`` on
``eventTimestamp`` and ``resourceGroupName``, pages of 50 through ``nextLink``) holds a
``Microsoft.Compute/virtualMachines/delete`` Started and Succeeded event per deleted VM; the
instance view's ``ProvisioningState`` status carries the ``time`` of the VM's last operation
(creation, deallocation).
Storage accounts, managed identities and role assignments: ``tests/fakes/azure_storage_arm.py``
(its levers under ``/_control/storage/``).

Run alone: ``python tests/fakes/azure_arm.py --port 8443``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import itertools
import json
import re
import threading
import time
import uuid
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

try:
    import azure_vmss
except ImportError:  # imported as tests.fakes.azure_arm
    from tests.fakes import azure_vmss
try:
    import malformed
except ImportError:  # imported as tests.fakes.azure_arm
    from tests.fakes import malformed
try:  # storage accounts, identities, role assignments
    import azure_storage_arm
except ImportError:  # imported as tests.fakes.azure_arm
    from tests.fakes import azure_storage_arm

SUBSCRIPTION = "00000000-0000-0000-0000-00000000f1ee"
DEFAULT_CAPACITY = 64

#: GPU sizes the fake offers when a test names none (zones 1-3 in eastus, none in westus2).
DEFAULT_SKUS: list[dict[str, Any]] = [
    {"name": "Standard_NC24ads_A100_v4", "location": "eastus", "zones": ["1", "2", "3"]},
    {"name": "Standard_NC24ads_A100_v4", "location": "westus2", "zones": []},
    {"name": "Standard_ND96asr_v4", "location": "eastus", "zones": ["1", "2"], "restricted_zones": ["2"]},
    {"name": "Standard_NV36ads_A10_v5", "location": "eastus", "zones": [], "restricted": True},
]

#: Hourly (on-demand, spot) USD the fake's Retail Prices API answers per size (not the snapshot's).
DEFAULT_PRICES = {
    "Standard_NC24ads_A100_v4": (3.5, 0.42),
    "Standard_ND96asr_v4": (27.0, 2.9),
    "Standard_NV36ads_A10_v5": (3.1, 0.7),
}
PRICES_PAGE = 3
#: vCPU limits of the compute usages unless a test sets one (``quota``: ``location/name``); roomy, so
#: that only a test that means a quota to bind meets one.
DEFAULT_QUOTAS = {"lowPriorityCores": 10000, "cores": 10000}
DEFAULT_FAMILY_QUOTA = 10000
ACTIVITY_PAGE = 50
#: The "wrong-types" malformed body per target: a mapping where the ``value`` list belongs.
WRONG_TYPES = {"vms": b'{"value": {"name": "sf-0", "tags": "spotfleet:fleet"}}'}

#: Marketplace images the fake knows (publisher, offer, sku, all lower case; any version): Ubuntu-HPC
#: 22.04 (NVIDIA driver, CUDA, OFED: github.com/Azure/azhpc-images) and Canonical's plain Ubuntu.
IMAGES = {
    ("microsoft-dsvm", "ubuntu-hpc", "2204"),
    ("microsoft-dsvm", "ubuntu-hpc", "2404"),
    ("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2"),
    ("canonical", "ubuntu-24_04-lts", "server"),
}


def price_items(skus: list[dict[str, Any]], table: dict[str, tuple[float, float]]) -> list[dict[str, Any]]:
    """Retail Prices items as the API lists them: Linux and Windows, on-demand, Spot and Low Priority meters."""
    items = []
    for sku in skus:
        if sku["name"] not in table:
            continue
        od, spot = table[sku["name"]]
        short = sku["name"].split("_", 1)[1].replace("_", " ")
        for loc in sku["locations"]:
            for product, factor in (
                (f"Virtual Machines {short} Series", 1.0),
                (f"Virtual Machines {short} Series Windows", 1.4),
            ):
                for meter, price in ((short, od), (f"{short} Spot", spot), (f"{short} Low Priority", spot * 0.9)):
                    items.append(
                        {
                            "currencyCode": "USD",
                            "retailPrice": round(price * factor, 4),
                            "unitPrice": round(price * factor, 4),
                            "armRegionName": loc,
                            "location": loc,
                            "meterName": meter,
                            "skuName": meter,
                            "productName": product,
                            "armSkuName": sku["name"],
                            "serviceName": "Virtual Machines",
                            "serviceFamily": "Compute",
                            "unitOfMeasure": "1 Hour",
                            "type": "Consumption",
                            "isPrimaryMeterRegion": True,
                        }
                    )
    return items


#: Fault kind -> (HTTP status, ARM code, message); "capacity" fails the creation asynchronously.
FAULTS = {
    "throttle": (429, "TooManyRequests", "The request is being throttled."),
    "quota": (
        409,
        "OperationNotAllowed",
        "Operation could not be completed as it results in exceeding approved "
        "LowPriorityCores quota. Location: {location}, Current Limit: 0, Additional Required: 24.",
    ),
    "auth": (
        403,
        "AuthorizationFailed",
        "The client does not have authorization to perform action 'Microsoft.Compute/virtualMachines/write'.",
    ),
    "server-error": (500, "InternalServerError", "An internal server error occurred."),
    "sku": (
        409,
        "SkuNotAvailable",
        "The requested size for resource is currently not available in location '{location}' for subscription.",
    ),
}


def family_of(size: str) -> str:
    """The quota family of a size, as Resource SKUs and usages name it (``Standard_NC24ads_A100_v4`` ->
    ``standardNCADSA100v4Family``; Azure's own names have exceptions a fake need not copy)."""
    series, _, version = re.sub(r"^Standard_([A-Z]+)\d+", r"\1", size).rpartition("_v")
    return f"standard{series.replace('_', '').upper()}v{version}Family"


def vcpus_of(size: str) -> int:
    """The vCPUs of a size: the number after its series letters (``Standard_NC24ads_A100_v4`` -> 24)."""
    m = re.search(r"^Standard_[A-Z]+(\d+)", size)
    return int(m.group(1)) if m else 0


def sku_row(spec: dict[str, Any]) -> dict[str, Any]:
    """A Resource SKU as ARM lists it, from a short ``{name, location, zones, restricted...}`` spec."""
    name, location, zones = spec["name"], spec["location"], list(spec.get("zones") or [])
    restrictions = []
    if spec.get("restricted"):
        restrictions.append(
            {
                "type": "Location",
                "values": [location],
                "reasonCode": "NotAvailableForSubscription",
                "restrictionInfo": {"locations": [location]},
            }
        )
    if spec.get("restricted_zones"):
        restrictions.append(
            {
                "type": "Zone",
                "values": [location],
                "reasonCode": "NotAvailableForSubscription",
                "restrictionInfo": {"locations": [location], "zones": list(spec["restricted_zones"])},
            }
        )
    return {
        "resourceType": "virtualMachines",
        "name": name,
        "tier": "Standard",
        "size": name.split("_", 1)[1],
        "family": family_of(name),
        "locations": [location],
        "locationInfo": [{"location": location, "zones": zones, "zoneDetails": []}],
        "capabilities": [{"name": "LowPriorityCapable", "value": "True"}],
        "restrictions": restrictions,
    }


class ArmState:
    """Everything the fake holds; one lock guards it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset({})

    def reset(self, body: dict[str, Any]) -> None:
        self.skus = [sku_row(s) for s in body.get("skus", DEFAULT_SKUS)]
        self.prices = price_items(self.skus, {k: tuple(v) for k, v in (body.get("prices") or DEFAULT_PRICES).items()})
        self.capacity: dict[str, int] = {k.lower(): int(v) for k, v in (body.get("capacity") or {}).items()}
        self.quotas: dict[str, int] = {k.lower(): int(v) for k, v in (body.get("quotas") or {}).items()}
        self.groups: dict[str, dict[str, Any]] = {}
        self.group_race: dict[str, str] = {}  # group -> the location a rival PUT gives it first
        gate = int(body.get("group_gate") or 0)  # existence checks of a missing group held until this many
        self.group_gate = threading.Barrier(gate, timeout=3.0) if gate > 1 else None
        self.vnets: dict[tuple[str, str], dict[str, Any]] = {}
        self.nsgs: dict[tuple[str, str], dict[str, Any]] = {}
        self.nics: dict[tuple[str, str], dict[str, Any]] = {}
        self.vms: dict[tuple[str, str], dict[str, Any]] = {}
        self.vmss: dict[tuple[str, str], dict[str, Any]] = {}
        self.ppgs: dict[tuple[str, str], dict[str, Any]] = {}
        self.ops: dict[str, dict[str, Any]] = {}
        self.faults: list[dict[str, Any]] = []
        self.broken: list[dict[str, Any]] = []  # "malformed 200" faults: {target, variant, count}
        self.calls: dict[str, int] = {}
        self.deleted: list[str] = []
        self.activity: list[dict[str, Any]] = []
        self.latency = float(body.get("latency", 0.0))
        self.retry_after = int(body.get("retry_after", 1))
        #: whether a Flexible set's VMs get the set's tags at creation (Azure documents neither way)
        self.vmss_tags_propagate = bool(body.get("vmss_tags_propagate", False))
        self.ids = itertools.count(1)
        self.storage = azure_storage_arm.StorageState()


def _key(location: str, size: str, priority: str) -> str:
    return f"{location}/{size}/{priority}".lower()


class Handler(BaseHTTPRequestHandler):
    server_version = "FakeARM/1.0"
    protocol_version = "HTTP/1.1"

    # ---- plumbing ------------------------------------------------------------------------
    @property
    def st(self) -> ArmState:
        return self.server.state  # type: ignore[attr-defined]

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet
        pass

    def _body(self) -> dict[str, Any]:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}") if n else {}

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None, broken: str = "") -> None:
        data, ctype = b"" if body is None else json.dumps(body).encode(), "application/json; charset=utf-8"
        variant = malformed.take(self.st.broken, broken) if broken else None
        if variant is not None:  # a "malformed" fault on this target: a broken body instead
            data, ctype = malformed.body(variant, data, WRONG_TYPES[broken], ctype)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-ms-request-id", str(uuid.uuid4()))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, {"error": {"code": code, "message": message}}, headers)

    def _base(self) -> str:
        return f"http://{self.headers.get('Host')}"

    def _op(self, location: str, outcome: dict[str, Any]) -> str:
        oid = str(uuid.uuid4())
        self.st.ops[oid] = {**outcome, "polls": 0}
        return (
            f"{self._base()}/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Compute/locations/{location}"
            f"/operations/{oid}?api-version=2024-07-01"
        )

    def do_GET(self) -> None:
        self._route("GET")  # noqa: E704

    def do_PUT(self) -> None:
        self._route("PUT")  # noqa: E704

    def do_POST(self) -> None:
        self._route("POST")  # noqa: E704

    def do_DELETE(self) -> None:
        self._route("DELETE")  # noqa: E704

    def do_HEAD(self) -> None:
        self._route("HEAD")  # noqa: E704

    def _route(self, method: str) -> None:
        url = urlparse(self.path)
        parts = [p for p in url.path.split("/") if p]
        low = [p.lower() for p in parts]
        body = self._body() if method in ("PUT", "POST") else {}
        if self.st.latency and low[:1] != ["_control"]:
            time.sleep(self.st.latency)
        gate = self.st.group_gate
        if (
            gate is not None
            and method in ("GET", "HEAD")
            and len(low) == 4
            and low[2] == "resourcegroups"
            and low[3] not in self.st.groups
        ):
            try:  # hold until that many callers looked (or 3 s passed): they all see it missing
                gate.wait()
            except threading.BrokenBarrierError:
                pass
        with self.st.lock:
            name = f"{method} {'/'.join(low[4:7]) if len(low) > 4 else '/'.join(low[:3])}"
            self.st.calls[name] = self.st.calls.get(name, 0) + 1
            if low[:1] == ["_control"]:
                return self._control(method, low[1:], body)
            if low[:3] == ["api", "retail", "prices"]:
                return self._prices(url.query)
            if len(low) < 2 or low[0] != "subscriptions":
                return self._error(404, "NotFound", f"no route {url.path}")
            if parts[1] != SUBSCRIPTION:
                return self._error(404, "SubscriptionNotFound", f"The subscription '{parts[1]}' could not be found.")
            rest, orig = low[2:], parts[2:]
            if azure_storage_arm.handles(rest):
                return azure_storage_arm.route(self, method, orig, rest, body)
            if rest[:3] == ["providers", "microsoft.compute", "skus"]:
                return self._send(200, {"value": self.st.skus})
            if rest[:3] == ["providers", "microsoft.compute", "locations"] and len(rest) >= 5:
                if rest[4] == "usages":
                    return self._usages(orig[3])
                if rest[4] == "operations":
                    return self._poll(orig[5])
            if rest[:4] == ["providers", "microsoft.insights", "eventtypes", "management"]:
                return self._activity(url.query)
            if rest[:1] == ["resourcegroups"] and len(rest) == 2:
                return self._group(method, orig[1], body)
            if rest[:1] == ["resourcegroups"] and len(rest) >= 5 and rest[2] == "providers":
                rg = orig[1].lower()
                if rg not in self.st.groups:
                    return self._error(404, "ResourceGroupNotFound", f"Resource group '{orig[1]}' could not be found.")
                kind = "/".join(rest[3:5])
                if kind == "microsoft.compute/virtualmachines":
                    if len(rest) == 5:
                        return self._send(
                            200,
                            {
                                "value": [
                                    self._vm_view(v, "instanceview" in url.query.lower())
                                    for (g, _), v in sorted(self.st.vms.items())
                                    if g == rg
                                ]
                            },
                            broken="vms",
                        )
                    if len(rest) == 7 and rest[6] == "simulateeviction" and method == "POST":
                        vm = self.st.vms.get((rg, orig[5].lower()))
                        if vm is None or vm["properties"].get("priority") != "Spot":
                            return self._error(
                                409 if vm else 404,
                                "OperationNotAllowed" if vm else "ResourceNotFound",
                                f"Virtual machine {orig[5]} is not an Azure Spot VM.",
                            )
                        self._evict(vm, time.time())
                        return self._send(204)
                    return self._vm(method, rg, orig[5], body, "instanceview" in url.query.lower())
                tables = {
                    "microsoft.network/networkinterfaces": self.st.nics,
                    "microsoft.network/virtualnetworks": self.st.vnets,
                    "microsoft.network/networksecuritygroups": self.st.nsgs,
                }
                if kind in tables and len(rest) == 5 and method == "GET":
                    return self._send(200, {"value": [n for (g, _), n in sorted(tables[kind].items()) if g == rg]})
                if kind == "microsoft.compute/proximityplacementgroups":
                    return self._ppg(method, rg, orig, body, len(rest))
                if kind == azure_vmss.KIND and len(rest) in (5, 6):
                    return azure_vmss.route(self, method, rg, orig, body)
                if kind in tables and len(rest) == 6:
                    return self._simple(method, tables[kind], rg, orig, body)
            return self._error(404, "InvalidResourceType", f"no route {url.path}")

    # ---- Retail Prices (no auth; pages through NextPageLink) ---------------------------------
    def _prices(self, query: str) -> None:
        fault = next((f for f in self.st.faults if f["count"] > 0 and f["target"] == "prices"), None)
        if fault:
            fault["count"] -= 1
            status, code, message = FAULTS[fault["kind"]]
            return self._error(status, code, message)
        params = parse_qs(query)
        flt = (params.get("$filter") or [""])[0]
        regions = re.findall(r"armRegionName eq '([^']+)'", flt)
        sizes = re.findall(r"armSkuName eq '([^']+)'", flt)
        rows = [
            i
            for i in self.st.prices
            if (not regions or i["armRegionName"] in regions) and (not sizes or i["armSkuName"] in sizes)
        ]
        skip = int((params.get("$skip") or ["0"])[0])
        page = rows[skip : skip + PRICES_PAGE]
        nxt = None
        if skip + PRICES_PAGE < len(rows):
            nxt = f"{self._base()}/api/retail/prices?" + urlencode({"$filter": flt, "$skip": skip + PRICES_PAGE})
        return self._send(
            200,
            {
                "BillingCurrency": "USD",
                "CustomerEntityId": "Default",
                "CustomerEntityType": "Retail",
                "Items": page,
                "NextPageLink": nxt,
                "Count": len(page),
            },
        )

    # ---- resource groups, usages, operations -----------------------------------------------
    def _group(self, method: str, name: str, body: dict[str, Any]) -> None:
        key = name.lower()
        if method == "HEAD":
            return self._send(204 if key in self.st.groups else 404)
        if method == "GET":
            if key not in self.st.groups:
                return self._error(404, "ResourceGroupNotFound", f"Resource group '{name}' could not be found.")
            return self._send(200, self.st.groups[key])
        if method == "PUT":
            rival = self.st.group_race.pop(key, None)
            if rival and key not in self.st.groups:  # another process made it first, in its own region
                self.st.groups[key] = _group_row(name, rival, {})
            old = self.st.groups.get(key)
            if old is not None and old["location"].lower() != str(body.get("location", "")).lower():
                return self._error(
                    409,
                    "InvalidResourceGroupLocation",
                    f"Invalid resource group location "
                    f"'{body.get('location', '')}'. The Resource group already exists in location "
                    f"'{old['location']}'.",
                )
            self.st.groups[key] = _group_row(name, body.get("location", ""), body.get("tags") or {})
            return self._send(201 if old is None else 200, self.st.groups[key])
        return self._error(405, "MethodNotAllowed", method)

    def _usages(self, location: str) -> None:
        return self._send(200, {"value": self._usage_rows(location)})

    def _usage_rows(self, location: str) -> list[dict[str, Any]]:
        """Compute usages in ``location``: Spot vCPUs (``lowPriorityCores``), regular vCPUs (``cores``)
        and regular vCPUs per VM family of the SKUs offered there; limits from ``quotas``."""

        def used(spot: bool, family: str = "") -> int:
            return sum(
                vcpus_of(v["properties"]["hardwareProfile"]["vmSize"])
                for v in self.st.vms.values()
                if v["location"] == location
                and (v["properties"].get("priority") == "Spot") == spot
                and v["properties"]["provisioningState"] != "Failed"
                and (not family or family_of(v["properties"]["hardwareProfile"]["vmSize"]) == family)
            )

        rows = [
            ("lowPriorityCores", "Total Regional Low-priority vCPUs", used(True)),
            ("cores", "Total Regional vCPUs", used(False)),
        ]
        families = sorted({s["family"] for s in self.st.skus if location in s["locations"]})
        rows += [(f, f"Standard {f[8:-6]} Family vCPUs", used(False, f)) for f in families]
        return [
            {
                "name": {"value": n, "localizedValue": text},
                "currentValue": cur,
                "unit": "Count",
                "limit": self.st.quotas.get(f"{location}/{n}".lower(), DEFAULT_QUOTAS.get(n, DEFAULT_FAMILY_QUOTA)),
            }
            for n, text, cur in rows
        ]

    def _over_quota(self, location: str, size: str, priority: str) -> str:
        """The name of the quota one more ``size`` VM would exceed, "" when none."""
        names = ("lowPriorityCores",) if priority == "Spot" else ("cores", family_of(size))
        for row in self._usage_rows(location):
            if row["name"]["value"] in names and row["currentValue"] + vcpus_of(size) > row["limit"]:
                return row["name"]["value"]
        return ""

    def _poll(self, oid: str) -> None:
        op = self.st.ops.get(oid)
        if op is None:
            return self._error(404, "NotFound", f"operation {oid} not found")
        op["polls"] += 1
        if op.get("vmss"):
            return azure_vmss.poll(self, oid, op)
        if op["polls"] == 1 and op.get("vm"):
            return self._send(200, {"name": oid, "status": "InProgress"})
        vm = self.st.vms.get(op["vm"]) if op.get("vm") else None
        if op.get("error"):
            if vm is not None:
                vm["properties"]["provisioningState"] = "Failed"
            return self._send(200, {"name": oid, "status": "Failed", "error": op["error"]})
        if vm is not None:
            vm["properties"]["provisioningState"] = "Succeeded"
            vm["_power"] = "running"
            vm["_status_time"] = _iso(time.time())
        return self._send(200, {"name": oid, "status": "Succeeded"})

    # ---- networks ----------------------------------------------------------------------------
    def _simple(self, method: str, table: dict, rg: str, orig: list[str], body: dict[str, Any]) -> None:
        name = orig[5]
        key = (rg, name.lower())
        rid = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{orig[1]}/providers/{orig[3]}/{orig[4]}/{name}"
        if method == "GET":
            if key not in table:
                return self._error(
                    404,
                    "ResourceNotFound",
                    f"The Resource '{orig[3]}/{orig[4]}/{name}' under resource group '{orig[1]}' was not found.",
                )
            return self._send(200, table[key])
        if method == "PUT":
            created = key not in table
            props = dict(body.get("properties") or {})
            if orig[4].lower() == "networksecuritygroups":
                props["securityRules"] = [
                    {**r, "id": f"{rid}/securityRules/{r['name']}"} for r in props.get("securityRules") or []
                ]
                props["defaultSecurityRules"] = _default_rules(rid)
            elif orig[4].lower() == "virtualnetworks":
                for s in props.get("subnets") or []:
                    nsg = ((s.get("properties") or {}).get("networkSecurityGroup") or {}).get("id", "")
                    m = re.search(
                        r"resourceGroups/([^/]+)/providers/Microsoft.Network/networkSecurityGroups/([^/]+)$", nsg, re.I
                    )
                    if nsg and (not m or (m.group(1).lower(), m.group(2).lower()) not in self.st.nsgs):
                        return self._error(
                            400,
                            "InvalidResourceReference",
                            f"Resource {nsg} referenced by resource {rid} was not found.",
                        )
                props["subnets"] = [
                    {
                        **s,
                        "id": f"{rid}/subnets/{s['name']}",
                        "properties": {**(s.get("properties") or {}), "provisioningState": "Succeeded"},
                    }
                    for s in props.get("subnets") or []
                ]
            else:
                for cfg in props.get("ipConfigurations") or []:
                    subnet = ((cfg.get("properties") or {}).get("subnet") or {}).get("id", "")
                    m = re.search(
                        r"resourceGroups/([^/]+)/providers/Microsoft.Network/virtualNetworks/([^/]+)/", subnet, re.I
                    )
                    if not m or (m.group(1).lower(), m.group(2).lower()) not in self.st.vnets:
                        return self._error(
                            400,
                            "InvalidResourceReference",
                            f"Resource {subnet} referenced by resource {rid} was not found.",
                        )
                    cfg["id"] = f"{rid}/ipConfigurations/{cfg.get('name', 'ipconfig1')}"
            props["provisioningState"] = "Succeeded"
            table[key] = {
                "id": rid,
                "name": name,
                "location": body.get("location", ""),
                "tags": body.get("tags") or {},
                "properties": props,
            }
            op = self._op(body.get("location", "eastus"), {})
            return self._send(201 if created else 200, table[key], {"Azure-AsyncOperation": op})
        if method == "DELETE":
            if key not in table:
                return self._send(204)
            if table is self.st.nics:
                user = next(
                    (
                        v["name"]
                        for v in self.st.vms.values()
                        if any(n["id"].lower() == rid.lower() for n in _nic_refs(v))
                    ),
                    None,
                )
                if user:
                    return self._error(
                        400,
                        "NicInUse",
                        f"Network Interface {rid} is used by existing resource "
                        f"{user}. In order to delete the network interface, it must be dissociated.",
                    )
            if table is self.st.vnets and any(n for n in self.st.nics.values() if rid.lower() in json.dumps(n).lower()):
                return self._error(400, "InUseSubnetCannotBeDeleted", f"Subnet of {rid} is in use.")
            if table is self.st.nsgs and any(rid.lower() in json.dumps(v).lower() for v in self.st.vnets.values()):
                return self._error(
                    400,
                    "InUseNetworkSecurityGroupCannotBeDeleted",
                    f"Network security group {rid} cannot be deleted because it is in use by a subnet.",
                )
            del table[key]
            self.st.deleted.append(rid)
            return self._send(202, None, {"Location": self._op("eastus", {}), "Retry-After": "0"})
        return self._error(405, "MethodNotAllowed", method)

    # ---- virtual machines ------------------------------------------------------------------
    def _vm_view(self, vm: dict[str, Any], instance_view: bool, secrets: bool = False) -> dict[str, Any]:
        out = {k: v for k, v in vm.items() if not k.startswith("_")}
        props = dict(out["properties"])
        if not secrets:  # ARM never returns customData; the control API shows it to tests
            props.pop("osProfile", None)
        if instance_view:
            statuses = [
                {
                    "code": f"ProvisioningState/{props['provisioningState'].lower()}",
                    "level": "Info",
                    "time": vm.get("_status_time", props.get("timeCreated")),
                }
            ]
            if vm.get("_power"):
                statuses.append({"code": f"PowerState/{vm['_power']}"})
            props["instanceView"] = {"statuses": statuses}
        out["properties"] = props
        return out

    def _vm(self, method: str, rg: str, name: str, body: dict[str, Any], instance_view: bool) -> None:
        key = (rg, name.lower())
        vm = self.st.vms.get(key)
        if method == "GET":
            if vm is None:
                return self._missing("virtualMachines", name, rg)
            return self._send(200, self._vm_view(vm, instance_view))
        if method == "DELETE":
            if vm is None:
                return self._send(204)
            self._remove_vm(key)
            return self._send(202, None, {"Location": self._op(vm["location"], {}), "Retry-After": "0"})
        if method != "PUT":
            return self._error(405, "MethodNotAllowed", method)
        props = body.get("properties") or {}
        location = body.get("location", "")
        size = (props.get("hardwareProfile") or {}).get("vmSize", "")
        priority = props.get("priority") or "Regular"
        target = _key(location, size, priority)
        fault = next((f for f in self.st.faults if f["count"] > 0 and f["target"] in (target, "*")), None)
        if fault and fault["kind"] != "capacity":
            fault["count"] -= 1
            status, code, message = FAULTS[fault["kind"]]
            return self._error(
                status,
                code,
                message.format(location=location),
                {"Retry-After": str(self.st.retry_after)} if status == 429 else None,
            )
        if vm is not None:
            return self._send(200, self._vm_view(vm, False))
        refused = self.profile_refusal(props)
        if refused:
            return self._error(*refused)
        over = self._over_quota(location, size, priority)
        if over:
            return self._error(
                409,
                "OperationNotAllowed",
                f"Operation could not be completed as it results in "
                f"exceeding approved {over} quota. Location: {location}, Additional Required: "
                f"{vcpus_of(size)}.",
            )
        for ref in _nic_refs(body):
            m = re.search(r"resourceGroups/([^/]+)/.*/networkInterfaces/([^/]+)$", ref["id"], re.I)
            if not m or (m.group(1).lower(), m.group(2).lower()) not in self.st.nics:
                return self._error(400, "NotFound", f"Resource {ref['id']} not found.")
        identity, problem = self.identity_of(body)
        if problem:
            return self._error(400, "FailedIdentityOperation", problem)
        ppg_ref = (props.get("proximityPlacementGroup") or {}).get("id")
        if ppg_ref:
            m = re.search(
                r"resourceGroups/([^/]+)/providers/Microsoft.Compute/proximityPlacementGroups/([^/]+)$", ppg_ref, re.I
            )
            ppg = self.st.ppgs.get((m.group(1).lower(), m.group(2).lower())) if m else None
            if ppg is None:
                return self._error(404, "NotFound", f"Resource {ppg_ref} not found.")
            if ppg["location"] != location:
                return self._error(
                    400,
                    "InvalidParameter",
                    f"The proximity placement group {ppg['name']} is in "
                    f"location {ppg['location']}; a VM in {location} cannot be placed in it.",
                )
        rid = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}"
        vm = {
            "id": rid,
            "name": name,
            "type": "Microsoft.Compute/virtualMachines",
            "location": location,
            "tags": body.get("tags") or {},
            "zones": body.get("zones") or None,
            **({"identity": identity} if identity else {}),
            "properties": {
                **props,
                "vmId": str(uuid.uuid4()),
                "provisioningState": "Creating",
                "timeCreated": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
            },
        }
        error = None
        if fault is not None:
            fault["count"] -= 1
        if fault is not None or self.room(location, size, priority) <= 0:
            code = "ZonalAllocationFailed" if body.get("zones") else "AllocationFailed"
            error = {
                "code": code,
                "message": f"Allocation failed. We do not have sufficient capacity for the "
                f"requested VM size {size} in this region.",
            }
        self.st.vms[key] = vm
        op = self._op(location, {"vm": key, "error": error})
        return self._send(201, self._vm_view(vm, False), {"Azure-AsyncOperation": op})

    def _ppg(self, method: str, rg: str, orig: list[str], body: dict[str, Any], depth: int) -> None:
        """Proximity placement groups (see the module doc)."""
        if depth == 5:
            if method != "GET":
                return self._error(405, "MethodNotAllowed", method)
            return self._send(
                200, {"value": [self._ppg_view(g) for (r, _), g in sorted(self.st.ppgs.items()) if r == rg]}
            )
        name = orig[5]
        key = (rg, name.lower())
        group = self.st.ppgs.get(key)
        if method == "GET":
            if group is None:
                return self._missing("proximityPlacementGroups", name, rg)
            return self._send(200, self._ppg_view(group))
        if method == "DELETE":
            if group is None:
                return self._send(204)
            if self._ppg_members(group):
                return self._error(
                    409,
                    "OperationNotAllowed",
                    f"Proximity placement group {name} cannot be deleted while virtual machines are allocated in it.",
                )
            del self.st.ppgs[key]
            return self._send(200)
        if method != "PUT":
            return self._error(405, "MethodNotAllowed", method)
        location = str(body.get("location") or "")
        if group is not None and group["location"] != location:
            return self._error(
                409,
                "InvalidParameter",
                f"Proximity placement group {name} is in location "
                f"{group['location']}; its location cannot change to {location}.",
            )
        rid = (
            f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{rg}/providers/Microsoft.Compute/"
            f"proximityPlacementGroups/{name}"
        )
        made = group is None
        props = body.get("properties") or {}
        self.st.ppgs[key] = {
            "id": rid,
            "name": name,
            "type": "Microsoft.Compute/proximityPlacementGroups",
            "location": location,
            "tags": body.get("tags") or {},
            "properties": {"proximityPlacementGroupType": props.get("proximityPlacementGroupType") or "Standard"},
        }
        return self._send(201 if made else 200, self._ppg_view(self.st.ppgs[key]))

    def _missing(self, kind: str, name: str, rg: str) -> None:
        return self._error(
            404,
            "ResourceNotFound",
            f"The Resource 'Microsoft.Compute/{kind}/{name}' under resource group '{rg}' was not found.",
        )

    def _ppg_members(self, group: dict[str, Any]) -> list[str]:
        return [
            vm["id"]
            for vm in self.st.vms.values()
            if ((vm["properties"].get("proximityPlacementGroup") or {}).get("id") or "").lower() == group["id"].lower()
        ]

    def _ppg_view(self, group: dict[str, Any]) -> dict[str, Any]:
        return {
            **group,
            "properties": {**group["properties"], "virtualMachines": [{"id": i} for i in self._ppg_members(group)]},
        }

    def room(self, location: str, size: str, priority: str) -> int:
        """How many more VMs of ``size`` and ``priority`` the test's capacity allows in ``location``."""
        target = _key(location, size, priority)
        live = sum(
            1
            for v in self.st.vms.values()
            if v["properties"]["provisioningState"] != "Failed"
            and _key(
                v["location"],
                v["properties"]["hardwareProfile"]["vmSize"],
                v["properties"].get("priority") or "Regular",
            )
            == target
        )
        return self.st.capacity.get(target, DEFAULT_CAPACITY) - live

    def profile_refusal(self, profile: dict[str, Any]) -> tuple[int, str, str] | None:
        """(status, code, message) ARM answers for a VM (or scale-set VM profile) ``profile`` whose
        image is unknown or whose Linux sign-in is refused (:func:`os_refusal`); None when it passes."""
        image = image_refusal(profile)
        if image:
            return image
        problem = os_refusal(profile)
        return (400, "InvalidParameter", problem[1]) if problem else None

    def identity_of(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """A VM's or scale set's ``identity`` as ARM returns it, or the problem ARM names."""
        return azure_storage_arm.vm_identity(self.st.storage, body)

    def fault(self, kind: str) -> tuple[int, str, str]:
        return FAULTS[kind]

    def _remove_vm(self, key: tuple[str, str], at: float | None = None) -> None:
        vm = self.st.vms.pop(key)
        self.st.deleted.append(vm["id"])
        for status in ("Started", "Succeeded"):
            self.st.activity.append(
                {
                    "eventTimestamp": _iso(time.time() if at is None else at),
                    "resourceGroupName": key[0],
                    "resourceId": vm["id"],
                    "resourceProviderName": {"value": "Microsoft.Compute"},
                    "operationName": {
                        "value": "Microsoft.Compute/virtualMachines/delete",
                        "localizedValue": "Delete Virtual Machine",
                    },
                    "status": {"value": status, "localizedValue": status},
                    "category": {"value": "Administrative"},
                    "level": "Informational",
                    "eventDataId": str(uuid.uuid4()),
                    "subscriptionId": SUBSCRIPTION,
                }
            )
        azure_vmss.member_removed(self.st, vm)
        for ref in _nic_refs(vm):
            if (ref.get("properties") or {}).get("deleteOption") == "Delete":
                m = re.search(r"resourceGroups/([^/]+)/.*/networkInterfaces/([^/]+)$", ref["id"], re.I)
                if m and self.st.nics.pop((m.group(1).lower(), m.group(2).lower()), None) is not None:
                    self.st.deleted.append(ref["id"])

    def _evict(self, vm: dict[str, Any], at: float) -> None:
        """Azure takes the Spot VM back: deleted (with its Delete-option NICs) or deallocated."""
        if vm["properties"].get("evictionPolicy") == "Delete":
            self._remove_vm(next(k for k, v in self.st.vms.items() if v is vm), at)
        else:
            vm["_power"] = "deallocated"
            vm["_status_time"] = _iso(at)

    # ---- Activity Log ----------------------------------------------------------------------------
    def _activity(self, query: str) -> None:
        params = parse_qs(query)
        flt = (params.get("$filter") or [""])[0]
        since = re.search(r"eventTimestamp ge '([^']+)'", flt)
        until = re.search(r"eventTimestamp le '([^']+)'", flt)
        group = re.search(r"resourceGroupName eq '([^']+)'", flt)
        if not since:
            return self._error(400, "BadRequest", "The filter must contain 'eventTimestamp ge'.")
        lo, hi = _epoch(since.group(1)), _epoch(until.group(1)) if until else time.time()
        rows = [
            e
            for e in self.st.activity
            if lo <= _epoch(e["eventTimestamp"]) <= hi
            and (not group or e["resourceGroupName"] == group.group(1).lower())
        ]
        skip = int((params.get("$skip") or ["0"])[0])
        page = rows[skip : skip + ACTIVITY_PAGE]
        nxt = None
        if skip + ACTIVITY_PAGE < len(rows):
            nxt = f"{self._base()}{urlparse(self.path).path}?" + urlencode(
                {"api-version": "2015-04-01", "$filter": flt, "$skip": skip + ACTIVITY_PAGE}
            )
        return self._send(200, {"value": page, "nextLink": nxt})

    # ---- control -------------------------------------------------------------------------------
    def _control(self, method: str, path: list[str], body: dict[str, Any]) -> None:
        st = self.st
        what = path[0] if path else ""
        if what == "storage":
            return azure_storage_arm.control(self, path[1:], body)
        if what == "reset":
            st.reset(body)
            return self._send(200, {"ok": True})
        if what == "group_race":
            st.group_race[body["name"].lower()] = body["location"]
            return self._send(200, {"ok": True})
        if what == "capacity":
            st.capacity[body["target"].lower()] = int(body["count"])
            return self._send(200, {"ok": True})
        if what == "quota":
            st.quotas[body["target"].lower()] = int(body["limit"])
            return self._send(200, {"ok": True})
        if what == "malformed":
            if body.get("target") not in WRONG_TYPES or body.get("variant") not in malformed.VARIANTS:
                return self._error(
                    400,
                    "InvalidRequest",
                    f"malformed needs target {', '.join(WRONG_TYPES)} and a variant of {', '.join(malformed.VARIANTS)}",
                )
            st.broken.append({"target": body["target"], "variant": body["variant"], "count": int(body.get("count", 1))})
            return self._send(200, {"ok": True})
        if what == "faults":
            st.faults.append({"target": body["target"].lower(), "kind": body["kind"], "count": int(body["count"])})
            return self._send(200, {"ok": True})
        if what == "foreign":
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
            names = []
            for _ in range(int(body.get("count", 1))):
                name = f"theirs-{next(st.ids)}"
                rid = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}"
                st.vms[(rg, name)] = {
                    "id": rid,
                    "name": name,
                    "location": body["location"],
                    "tags": dict(body.get("tags") or {}),
                    "zones": None,
                    "_power": "running",
                    "properties": {
                        "hardwareProfile": {"vmSize": body["size"]},
                        "priority": body.get("priority", "Spot"),
                        "provisioningState": "Succeeded",
                        "vmId": str(uuid.uuid4()),
                    },
                }
                names.append(name)
            return self._send(200, {"names": names})
        if what == "evict":
            for vm in st.vms.values():
                if vm["name"] == body["name"]:
                    self._evict(vm, float(body.get("at") or time.time()))
                    return self._send(200, {"ok": True})
            return self._send(404, {"ok": False})
        if what == "vmss_foreign":
            return azure_vmss.control_foreign(self, body)
        if what == "state":
            return self._send(
                200,
                {
                    "groups": list(st.groups.values()),
                    "vnets": list(st.vnets.values()),
                    "nsgs": list(st.nsgs.values()),
                    "scale_sets": list(st.vmss.values()),
                    "nics": list(st.nics.values()),
                    "ppgs": [self._ppg_view(g) for g in st.ppgs.values()],
                    "vms": [self._vm_view(v, True, secrets=True) for v in st.vms.values()],
                    "deleted": st.deleted,
                },
            )
        if what == "calls":
            return self._send(200, {"calls": st.calls})
        return self._error(404, "NotFound", f"no control {what}")


def _default_rules(nsg_id: str) -> list[dict[str, Any]]:
    """The default rules Azure gives every NSG (priorities 65000-65500): in, the VNet and the load
    balancer, then deny all; out, the VNet and the internet, then deny all."""
    rows = [
        ("AllowVnetInBound", "Inbound", "VirtualNetwork", "Allow", 65000),
        ("AllowAzureLoadBalancerInBound", "Inbound", "AzureLoadBalancer", "Allow", 65001),
        ("DenyAllInBound", "Inbound", "*", "Deny", 65500),
        ("AllowVnetOutBound", "Outbound", "VirtualNetwork", "Allow", 65000),
        ("AllowInternetOutBound", "Outbound", "*", "Allow", 65001),
        ("DenyAllOutBound", "Outbound", "*", "Deny", 65500),
    ]
    return [
        {
            "name": n,
            "id": f"{nsg_id}/defaultSecurityRules/{n}",
            "properties": {
                "protocol": "*",
                "sourcePortRange": "*",
                "destinationPortRange": "*",
                "sourceAddressPrefix": src,
                "destinationAddressPrefix": "Internet" if n == "AllowInternetOutBound" else src,
                "access": access,
                "priority": prio,
                "direction": direction,
                "provisioningState": "Succeeded",
            },
        }
        for n, direction, src, access, prio in rows
    ]


def os_refusal(profile: dict[str, Any]) -> tuple[str, str] | None:
    """(target, message) of the ``InvalidParameter`` ARM answers for a VM's (or a scale set's VM
    profile's) OS and image settings, None when they pass: a Linux profile with password sign-in
    off needs at least one key, each at ``/home/<adminUsername>/.ssh/authorized_keys`` and an SSH-2
    RSA (2048 bits or more) or ED25519 public key ("Virtual Machines - Create Or Update",
    osProfile.linuxConfiguration.ssh, https://learn.microsoft.com/rest/api/compute/virtual-machines/create-or-update;
    key formats: https://learn.microsoft.com/azure/virtual-machines/linux/create-ssh-keys-detailed)."""
    os_profile = profile.get("osProfile") or {}
    linux = os_profile.get("linuxConfiguration")
    if linux is not None:
        keys = (linux.get("ssh") or {}).get("publicKeys") or []
        if linux.get("disablePasswordAuthentication") and not keys:
            return (
                "linuxConfiguration",
                "Authentication using either SSH or by user name and password must be enabled in Linux profile.",
            )
        for key in keys:
            if key.get("path") != f"/home/{os_profile.get('adminUsername', '')}/.ssh/authorized_keys":
                return (
                    "linuxConfiguration.ssh.publicKeys.path",
                    "The value of parameter linuxConfiguration.ssh.publicKeys.path is invalid.",
                )
            if not _ssh_key_ok(str(key.get("keyData") or "")):
                return (
                    "linuxConfiguration.ssh.publicKeys.keyData",
                    "The value of parameter linuxConfiguration.ssh.publicKeys.keyData is invalid.",
                )
    return None


def image_refusal(profile: dict[str, Any]) -> tuple[int, str, str] | None:
    """(status, code, message) for an ``imageReference`` the fake's marketplace does not hold."""
    ref = (profile.get("storageProfile") or {}).get("imageReference") or {}
    if str(ref.get("id") or "").startswith("/subscriptions/"):
        return None  # a managed or gallery image: not modelled, taken as it is
    urn = tuple(str(ref.get(k) or "").lower() for k in ("publisher", "offer", "sku"))
    if urn in IMAGES:
        return None
    return (
        404,
        "PlatformImageNotFound",
        f"The platform image '{':'.join(urn)}:{ref.get('version', '')}' is not "
        "available. Verify that all fields in the storage profile are correct.",
    )


def _ssh_key_ok(text: str) -> bool:
    """An ``ssh-rsa`` key of 2048 bits or more or an ``ssh-ed25519`` key (OpenSSH one-line form)."""
    kind, _, rest = text.strip().partition(" ")
    try:
        blob = base64.b64decode(rest.split(" ")[0], validate=True)
    except (binascii.Error, ValueError):
        return False
    fields, i = [], 0
    while i + 4 <= len(blob):
        n = int.from_bytes(blob[i : i + 4], "big")
        fields.append(blob[i + 4 : i + 4 + n])
        i += 4 + n
    if i != len(blob) or not fields or fields[0].decode(errors="replace") != kind:
        return False
    if kind == "ssh-rsa":
        return len(fields) == 3 and int.from_bytes(fields[2], "big").bit_length() >= 2048
    return kind == "ssh-ed25519" and len(fields) == 2 and len(fields[1]) == 32


def _group_row(name: str, location: str, tags: dict[str, str]) -> dict[str, Any]:
    return {
        "id": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{name}",
        "name": name,
        "location": location,
        "tags": tags,
        "properties": {"provisioningState": "Succeeded"},
    }


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _nic_refs(vm: dict[str, Any]) -> list[dict[str, Any]]:
    return list(((vm.get("properties") or {}).get("networkProfile") or {}).get("networkInterfaces") or [])


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client killed mid-request (kill -9 tests) is normal here, not worth a traceback."""


class ArmServer:
    """The fake on a background thread: ``ArmServer(port=0).start()``; ``url``; ``stop()``."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1"):
        self.httpd = _Server((host, port), Handler)
        self.httpd.state = ArmState()  # type: ignore[attr-defined]
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self._thread: threading.Thread | None = None

    def start(self) -> ArmServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8443)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    server = ArmServer(args.port, args.host)
    print(f"fake ARM on {server.url} (subscription {SUBSCRIPTION})", flush=True)
    server.httpd.serve_forever()


if __name__ == "__main__":
    main()
