"""A small Compute Engine (compute v1 REST) server for tests, benchmarks and manual runs.

There is no Compute Engine emulator, so this speaks the wire format the real
``google-cloud-compute`` client sends (REST transport, ``$alt=json;enum-encoding=int``):

* ``instances``: insert (``?requestId=``), get, list, ``aggregated/instances`` (``filter``,
  ``maxResults``/``pageToken``), delete, bulkInsert (``count``/``minCount`` as strings,
  ``namePattern`` or ``perInstanceProperties``); numeric string ids, labels, metadata,
  ``scheduling`` kept as sent, ``lastStopTimestamp`` on preemption;
* ``instances.getSerialPortOutput`` (``GET .../instances/{name}/serialPort?port=&start=``,
  https://cloud.google.com/compute/docs/reference/rest/v1/instances/getSerialPortOutput): port 1's
  boot lines and any text added with the ``console`` control, as ``contents``/``start``/``next``;
* zone operations: get, list, ``wait`` and ``aggregated/operations`` (the call itself answers
  ``RUNNING``); a failed one is ``DONE`` with ``error.errors[]`` and ``httpErrorStatusCode`` as
  GCE sends them (``ZONE_RESOURCE_POOL_EXHAUSTED``, ``VM_MIN_COUNT_NOT_REACHED``,
  ``QUOTA_EXCEEDED``); a repeated ``requestId`` returns the first
  operation and creates nothing; a preemption leaves a ``compute.instances.preempted`` operation;
* ``aggregated/machineTypes`` and ``aggregated/acceleratorTypes`` from a built-in world of 12
  zones; ``regions`` (get, list) with quotas whose usage counts the live VMs;
* the Cloud Billing Catalog's ``GET /v1/services/6F81-5844-456A/skus`` (pages of Compute Engine
  SKUs: family cores and RAM, GPUs, on-demand and Spot; ``pageSize``/``pageToken``/``nextPageToken``),
  for ``SPOTFLEET_GCP_BILLING_ENDPOINT``, from https://cloud.google.com/billing/v1/how-tos/catalog-api
  and https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list; the ``malformed``
  lever with ``call: billing.skus`` breaks its answers;
* synchronous refusals with Google's JSON error body: 429 ``rateLimitExceeded``, 403
  ``quotaExceeded`` / ``forbidden``, 503 ``backendError``, 404 ``notFound``, 409 ``alreadyExists``.

* ``resourcePolicies`` with a ``groupPlacementPolicy`` (compact placement): insert, get, list,
  ``aggregated/resourcePolicies``, delete, answered with region operations (``regionOperations``
  get and ``wait``), from https://cloud.google.com/compute/docs/reference/rest/v1/resourcePolicies
  and https://cloud.google.com/compute/docs/instances/use-compact-placement-policies. A VM names
  policies in ``resourcePolicies`` (URLs on ``insert``, names in a ``bulkInsert``'s
  ``instanceProperties``): an unknown policy is 404 ``notFound``, one of another region 400
  ``invalid``; a compact policy holds VMs of one zone (its first VM's) and at most its
  ``vmCount`` live VMs when that is set, anything else is 400 ``invalid`` and creates no VM; a
  policy live VMs still use cannot be deleted (400 ``resourceInUseByAnotherResource``).

Control API under ``/_fake/`` (JSON bodies): ``capacity`` {zone, machineType?, provisioningModel?,
count} caps live VMs of that kind in the zone (no capacity key = unlimited); ``fault`` {zone?,
machineType?, kind, count} fails the next launch calls (kinds: capacity, throttle, server-error,
auth, quota, quota-op); ``quota`` {region, metric, limit}; ``preempt`` {zone, name}; ``foreign``
{zone, name, machineType} makes a VM with no labels; ``latency`` {seconds} added to every API call;
``billing`` {down} fails the SKU listing; ``console`` {zone, name, text} appends to a VM's serial port 1;
``malformed`` {variant, count, call?} is the "malformed
200" fault: the next ``count`` answers to ``call`` (default ``instances.aggregatedList``; any method
name ``stats`` counts) are HTTP 200 with a broken body, ``variant`` truncated, html, empty (``{}``)
or wrong-types (a list where the ``items`` map of scopes belongs), from ``tests/fakes/malformed.py``;
``GET stats`` (calls per method), ``GET instances`` (every VM, any state) and ``GET policies`` (every
resource policy with the VMs that use it); ``reset``.

Run on its own: ``python tests/fakes/gce_server.py --port 8089 [--latency 0.05]``, then
``SPOTFLEET_GCE_ENDPOINT=http://127.0.0.1:8089``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

try:
    import malformed
except ImportError:  # imported as tests.fakes.gce_server (or fakes.gce_server)
    from . import malformed

API = "/compute/v1/projects/"
BASE = "https://www.googleapis.com/compute/v1/projects/"
#: The "wrong-types" malformed body: an aggregated list whose ``items`` is a list, not a map of scopes.
WRONG_TYPES = b'{"kind": "compute#instanceAggregatedList", "items": [{"instances": [{"name": 7}]}]}'

#: Accelerator-carrying machine types: name -> (vCPUs, memory MiB, accelerator type, count).
GPU_MACHINES: dict[str, tuple[int, int, str, int]] = {
    "a2-highgpu-1g": (12, 87040, "nvidia-tesla-a100", 1),
    "a2-highgpu-2g": (24, 174080, "nvidia-tesla-a100", 2),
    "a2-highgpu-4g": (48, 348160, "nvidia-tesla-a100", 4),
    "a2-highgpu-8g": (96, 696320, "nvidia-tesla-a100", 8),
    "a2-ultragpu-1g": (12, 174080, "nvidia-a100-80gb", 1),
    "a2-ultragpu-8g": (96, 1392640, "nvidia-a100-80gb", 8),
    "a3-highgpu-1g": (26, 239616, "nvidia-h100-80gb", 1),
    "a3-highgpu-8g": (208, 1916928, "nvidia-h100-80gb", 8),
    "g2-standard-4": (4, 16384, "nvidia-l4", 1),
    "g2-standard-8": (8, 32768, "nvidia-l4", 1),
    "g2-standard-24": (24, 98304, "nvidia-l4", 2),
    "g2-standard-48": (48, 196608, "nvidia-l4", 4),
    "g2-standard-96": (96, 393216, "nvidia-l4", 8),
}
PLAIN_MACHINES: dict[str, tuple[int, int]] = {
    "n1-standard-4": (4, 15360),
    "n1-standard-8": (8, 30720),
    "n1-standard-16": (16, 61440),
    "n1-standard-32": (32, 122880),
    "n1-standard-64": (64, 245760),
    "e2-standard-4": (4, 16384),
}
#: Attachable accelerator types -> most cards per VM.
ATTACHABLE = {"nvidia-tesla-t4": 4, "nvidia-tesla-v100": 8, "nvidia-tesla-p100": 4, "nvidia-tesla-p4": 4}
FAMILIES = {"a2": ("a2-",), "a3": ("a3-",), "g2": ("g2-",)}
#: zone -> machine families with GPUs, attachable accelerator types (n1 and e2 are everywhere).
WORLD: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "us-central1-a": (("a2", "a3", "g2"), ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p4")),
    "us-central1-b": (("a3", "g2"), ("nvidia-tesla-t4", "nvidia-tesla-v100")),
    "us-central1-c": (("a2", "g2"), ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100")),
    "us-central1-f": (("a2",), ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100")),
    "us-east1-b": (("g2",), ("nvidia-tesla-t4", "nvidia-tesla-p100")),
    "us-east1-c": (("a2",), ("nvidia-tesla-t4", "nvidia-tesla-v100")),
    "us-east1-d": ((), ("nvidia-tesla-t4",)),
    "us-east4-a": (("a3", "g2"), ("nvidia-tesla-t4",)),
    "us-west1-a": (("a2",), ("nvidia-tesla-t4", "nvidia-tesla-v100")),
    "us-west1-b": (("a2", "g2"), ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100")),
    "europe-west4-a": (("a2", "a3", "g2"), ("nvidia-tesla-t4", "nvidia-tesla-v100")),
    "europe-west4-b": (("a2", "g2"), ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100")),
}
DEFAULT_GPU_QUOTA = 512
#: Cloud Billing Catalog stand-in: hourly (on-demand, Spot) price per vCPU and GiB of each family
#: and per GPU, the same in every region of the world (list prices of us-central1, rounded).
FAMILY_PRICES = {
    "N1": ((0.031611, 0.00663), (0.004237, 0.000889)),
    "A2": ((0.031611, 0.01264), (0.004237, 0.0017)),
    "A3": ((0.0291, 0.01164), (0.0039, 0.00156)),
    "G2": ((0.024988, 0.0099), (0.002927, 0.00116)),
}
GPU_PRICES = {
    "Tesla T4": (0.35, 0.14),
    "Tesla V100": (2.48, 0.992),
    "Tesla P100": (1.46, 0.584),
    "Tesla P4": (0.6, 0.24),
    "Tesla A100": (2.933908, 1.1472),
    "A100 80GB": (3.92808, 1.5712),
    "H100 80GB": (9.79629, 2.253),
    "L4": (0.560040, 0.2231),
}
BILLING_SKUS = "/v1/services/6F81-5844-456A/skus"
PREEMPTED = "compute.instances.preempted"
DEFAULT_CPU_QUOTA = 100_000


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def quota_metric(accelerator_type: str, spot: bool) -> str:
    """GCE's quota metric for a GPU type: ``nvidia-h100-80gb`` -> ``NVIDIA_H100_GPUS``."""
    core = accelerator_type.upper().replace("-", "_").replace("NVIDIA_TESLA_", "NVIDIA_")
    core = core.replace("NVIDIA_H100_80GB", "NVIDIA_H100")
    return ("PREEMPTIBLE_" if spot else "") + core + "_GPUS"


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


def machines_in(zone: str) -> dict[str, tuple[int, int, str, int]]:
    """Every machine type offered in ``zone`` (plain ones with no accelerator: ("", 0))."""
    families, _ = WORLD[zone]
    out = {n: v for n, v in GPU_MACHINES.items() if any(n.startswith(FAMILIES[f]) for f in families)}
    out.update({n: (c, m, "", 0) for n, (c, m) in PLAIN_MACHINES.items()})
    return out


class ApiError(Exception):
    """An HTTP error answered with Google's JSON error body."""

    def __init__(self, status: int, reason: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.reason, self.message, self.headers = status, reason, message, headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "code": self.status,
                "message": self.message,
                "errors": [{"message": self.message, "domain": "global", "reason": self.reason}],
            }
        }


class Fault(Exception):
    """A failure decided before anything is created: a synchronous error or a failed operation."""

    def __init__(self, errors: list[dict[str, str]], http_status: int, http_message: str):
        super().__init__(errors[0]["message"])
        self.errors, self.http_status, self.http_message = errors, http_status, http_message


def _filter_terms(text: str) -> list[tuple[str, str, str]]:
    """``labels.a = "x" AND (name != y)`` -> [(field, op, value)]; enough of GCE's filter syntax."""
    return [
        (f, "=" if op in ("=", "eq") else "!=", v.strip('"'))
        for f, op, v in re.findall(r'([\w.\-]+)\s*(=|!=|\beq\b|\bne\b)\s*("[^"]*"|[^\s)]+)', text or "")
    ]


def _field(inst: dict[str, Any], path: str) -> str | None:
    node: Any = inst
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return str(node)


def matches(inst: dict[str, Any], terms: list[tuple[str, str, str]]) -> bool:
    for path, op, value in terms:
        have = _field(inst, path)
        hit = have is not None and re.fullmatch(value, have) is not None if op == "=" else have != value
        if not hit:
            return False
    return True


class GceWorld:
    """All state of the fake, guarded by one lock."""

    def __init__(self, latency: float = 0.0):
        self.lock = threading.RLock()
        self.latency = latency
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.ids = itertools.count(int(time.time() * 1000) % 10**12 * 1000 + 1)
            self.instances: dict[str, dict[str, dict[str, Any]]] = {z: {} for z in WORLD}
            self.ended: list[dict[str, Any]] = []
            self.operations: dict[str, dict[str, dict[str, Any]]] = {z: {} for z in WORLD}
            self.requests: dict[tuple[str, str], str] = {}
            self.capacity: dict[tuple[str, str, str], int] = {}
            self.faults: list[dict[str, Any]] = []
            self.broken: list[dict[str, Any]] = []  # "malformed 200" faults: {target (a call), variant, count}
            self.quotas: dict[tuple[str, str], float] = {}
            #: (region, name) -> the resource policy as GCE answers it, plus ``_zone`` (a compact
            #: policy's zone once a VM uses it)
            self.policies: dict[tuple[str, str], dict[str, Any]] = {}
            self.region_operations: dict[str, dict[str, Any]] = {}
            self.calls: Counter[str] = Counter()
            self.billing_down = False

    # ---- control ------------------------------------------------------------------------
    def take_fault(self, zone: str, machine: str) -> str | None:
        for fault in self.faults:
            if fault["count"] > 0 and fault.get("zone", zone) == zone and fault.get("machineType", machine) == machine:
                fault["count"] -= 1
                return str(fault["kind"])
        return None

    def room(self, zone: str, machine: str, model: str) -> int | None:
        """How many more VMs of this kind the zone takes now (None: no cap)."""
        caps = [n for (z, m, p), n in self.capacity.items() if z == zone and m in (machine, "*") and p in (model, "*")]
        if not caps:
            return None
        used = sum(
            1
            for i in self.instances[zone].values()
            if i["status"] != "TERMINATED" and i["_machine"] == machine and i["_model"] == model
        )
        return max(0, min(caps) - used)

    # ---- resource policies ------------------------------------------------------------------
    def policy_users(self, region: str, name: str) -> list[tuple[str, str]]:
        """(zone, VM name) of the live VMs that name policy ``name`` of ``region``."""
        return [
            (z, i["name"])
            for z, vms in self.instances.items()
            if region_of(z) == region
            for i in vms.values()
            if i["status"] != "TERMINATED"
            and any(p.rsplit("/", 1)[-1] == name for p in i.get("resourcePolicies") or [])
        ]

    def check_policies(self, project: str, zone: str, refs: list[str], n: int) -> list[str]:
        """The policies a new VM names (URLs or names), checked as GCE does; their URLs."""
        out = []
        for ref in refs:
            ref = str(ref)
            name = ref.rsplit("/", 1)[-1]
            m = re.search(r"regions/([a-z0-9-]+)/resourcePolicies/", ref)
            region = m.group(1) if m else region_of(zone)
            if region != region_of(zone):
                raise ApiError(
                    400,
                    "invalid",
                    f"Invalid value for field 'resource.resourcePolicies[0]': '{ref}'. "
                    f"Resource policy must be in the same region as the instance ({region_of(zone)}).",
                )
            policy = self.policies.get((region, name))
            if policy is None:
                raise ApiError(
                    404,
                    "notFound",
                    f"The resource 'projects/{project}/regions/{region}/resourcePolicies/{name}' was not found",
                )
            group = policy.get("groupPlacementPolicy")
            if group:
                if policy.get("_zone") and policy["_zone"] != zone:
                    raise ApiError(
                        400,
                        "invalid",
                        f"Compact placement policy {name} already places VMs in zone "
                        f"{policy['_zone']}; a VM in {zone} cannot use it.",
                    )
                most = group.get("vmCount")
                if most and len(self.policy_users(region, name)) + n > int(most):
                    raise ApiError(400, "invalid", f"Compact placement policy {name} allows at most {most} VMs.")
            out.append(f"{BASE}{project}/regions/{region}/resourcePolicies/{name}")
        return out

    # ---- quotas ---------------------------------------------------------------------------
    def usage(self, region: str) -> Counter[str]:
        used: Counter[str] = Counter()
        for zone, vms in self.instances.items():
            if region_of(zone) != region:
                continue
            for inst in vms.values():
                if inst["status"] == "TERMINATED":
                    continue
                used["CPUS"] += inst["_cpus"]
                if inst["_accel"]:
                    used[quota_metric(inst["_accel"], inst["_model"] == "SPOT")] += inst["_gpus"]
        return used

    def quota_list(self, region: str) -> list[dict[str, Any]]:
        used = self.usage(region)
        metrics = {"CPUS": DEFAULT_CPU_QUOTA}
        accels = {a for z in WORLD if region_of(z) == region for a in WORLD[z][1]}
        accels |= {
            GPU_MACHINES[m][2] for z in WORLD if region_of(z) == region for m in machines_in(z) if m in GPU_MACHINES
        }
        for acc in sorted(accels):
            for spot in (False, True):
                metrics[quota_metric(acc, spot)] = DEFAULT_GPU_QUOTA
        for (r, metric), limit in self.quotas.items():
            if r == region:
                metrics[metric] = limit
        return [{"metric": m, "limit": float(limit), "usage": float(used.get(m, 0))} for m, limit in metrics.items()]

    def check_quota(self, zone: str, shape: dict[str, Any], n: int) -> None:
        region = region_of(zone)
        limits = {q["metric"]: q for q in self.quota_list(region)}
        needs = {"CPUS": shape["_cpus"] * n}
        if shape["_accel"]:
            needs[quota_metric(shape["_accel"], shape["_model"] == "SPOT")] = shape["_gpus"] * n
        for metric, need in needs.items():
            q = limits[metric]
            if q["usage"] + need > q["limit"]:
                msg = f"Quota '{metric}' exceeded.  Limit: {q['limit']} in region {region}."
                raise Fault([{"code": "QUOTA_EXCEEDED", "message": msg}], 403, "FORBIDDEN")


class Handler(BaseHTTPRequestHandler):
    world: GceWorld
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.call = ""
        try:
            body = json.loads(raw) if raw else {}
            if url.path.startswith("/_fake/"):
                status, answer = 200, self._control(method, url.path[len("/_fake/") :], body)
            elif url.path == BILLING_SKUS and method == "GET":
                self.call = "billing.skus"
                status, answer = 200, self._skus(query)
            else:
                if self.world.latency > 0:
                    time.sleep(self.world.latency)
                status, answer = 200, self._api(method, url.path, query, body)
        except ApiError as err:
            status, answer = err.status, err.body()
        data, ctype = json.dumps(answer).encode(), "application/json; charset=UTF-8"
        with self.world.lock:
            variant = malformed.take(self.world.broken, self.call) if status == 200 and self.call else None
        if variant is not None:
            data, ctype = malformed.body(variant, data, WRONG_TYPES, ctype)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # ---- control API ----------------------------------------------------------------------
    def _control(self, method: str, path: str, body: dict[str, Any]) -> Any:
        w = self.world
        with w.lock:
            if path == "reset":
                w.reset()
            elif path == "capacity":
                w.capacity[(body["zone"], body.get("machineType", "*"), body.get("provisioningModel", "*"))] = int(
                    body["count"]
                )
            elif path == "fault":
                w.faults.append(
                    {k: body[k] for k in ("zone", "machineType") if k in body}
                    | {"kind": body["kind"], "count": int(body.get("count", 1))}
                )
            elif path == "malformed":
                if body.get("variant") not in malformed.VARIANTS:
                    raise ApiError(400, "invalid", f"variant must be one of {', '.join(malformed.VARIANTS)}")
                w.broken.append(
                    {
                        "target": body.get("call", "instances.aggregatedList"),
                        "variant": body["variant"],
                        "count": int(body.get("count", 1)),
                    }
                )
            elif path == "quota":
                w.quotas[(body["region"], body["metric"])] = float(body["limit"])
            elif path == "billing":
                w.billing_down = bool(body.get("down", False))
            elif path == "latency":
                w.latency = float(body["seconds"])
            elif path == "preempt":
                return self._preempt(body["zone"], body["name"], body.get("project", "fake"))
            elif path == "console":
                inst = w.instances[body["zone"]][body["name"]]
                inst["_console"] = inst.get("_console", "") + str(body["text"])
            elif path == "foreign":
                shape = self._shape(
                    body["zone"], body.get("machineType", "n1-standard-4"), {"onHostMaintenance": "TERMINATE"}, []
                )
                inst = self._create(
                    body.get("project", "fake"), body["zone"], body["name"], shape, {"name": body["name"]}
                )
                return _public(inst)
            elif path == "stats":
                return dict(w.calls)
            elif path == "instances":
                live = [_public(i) for vms in w.instances.values() for i in vms.values()]
                return {"instances": live, "ended": [_public(i) for i in w.ended]}
            elif path == "policies":
                return {
                    f"{r}/{n}": {**_public(p), "users": [f"{z}/{v}" for z, v in w.policy_users(r, n)]}
                    for (r, n), p in w.policies.items()
                }
            else:
                raise ApiError(404, "notFound", f"no control endpoint {path}")
        return {"ok": True}

    def _preempt(self, zone: str, name: str, project: str) -> dict[str, Any]:
        w = self.world
        inst = w.instances[zone].get(name)
        if inst is None:
            raise ApiError(404, "notFound", f"no instance {name} in {zone}")
        now = time.time()
        inst["status"], inst["lastStopTimestamp"] = "TERMINATED", rfc3339(now)
        action = (inst.get("scheduling") or {}).get("instanceTerminationAction", "STOP")
        op = self._operation(project, zone, PREEMPTED, inst, None, now)
        if action == "DELETE":
            w.ended.append(w.instances[zone].pop(name))
        return op

    # ---- Cloud Billing Catalog ----------------------------------------------------------------
    def _skus(self, query: dict[str, str]) -> dict[str, Any]:
        """Compute Engine SKUs in the catalog's shape, two per page."""
        with self.world.lock:
            self.world.calls["billing.skus"] += 1
            if self.world.billing_down:
                raise ApiError(503, "backendError", "The service is currently unavailable.")
        regions = sorted({region_of(z) for z in WORLD})
        rows = []
        for (name, prices), group in [
            *((kv, "CPU") for kv in FAMILY_PRICES.items()),
            *((kv, "GPU") for kv in GPU_PRICES.items()),
        ]:
            parts = [("Core", prices[0]), ("Ram", prices[1])] if group == "CPU" else [("", prices)]
            for part, (on_demand, spot) in parts:
                what = f"{name} Instance {part}" if group == "CPU" else f"Nvidia {name} GPU"
                if name == "N1" and group == "CPU":
                    what = f"N1 Predefined Instance {part}"
                for usage, price, prefix in (("OnDemand", on_demand, ""), ("Preemptible", spot, "Spot Preemptible ")):
                    units, nanos = int(price), round((price - int(price)) * 1e9)
                    rows.append(
                        {
                            "name": f"services/6F81-5844-456A/skus/{len(rows):04X}",
                            "skuId": f"{len(rows):04X}",
                            "description": f"{prefix}{what} running in Americas",
                            "category": {
                                "serviceDisplayName": "Compute Engine",
                                "resourceFamily": "Compute",
                                "resourceGroup": group,
                                "usageType": usage,
                            },
                            "serviceRegions": regions,
                            "pricingInfo": [
                                {
                                    "pricingExpression": {
                                        "usageUnit": "GiBy.h" if part == "Ram" else "h",
                                        "tieredRates": [
                                            {
                                                "startUsageAmount": 0,
                                                "unitPrice": {
                                                    "currencyCode": "USD",
                                                    "units": str(units),
                                                    "nanos": nanos,
                                                },
                                            }
                                        ],
                                    }
                                }
                            ],
                        }
                    )
        rows.append(
            {
                "description": "Commitment v1: Nvidia Tesla T4 GPU in Americas for 1 Year",
                "category": {"resourceFamily": "Compute", "usageType": "Commit1Yr"},
                "serviceRegions": regions,
            }
        )
        size = int(query.get("pageSize") or 5000)
        start = int(query.get("pageToken") or 0)
        out: dict[str, Any] = {"skus": rows[start : start + size]}
        if start + size < len(rows):
            out["nextPageToken"] = str(start + size)
        return out

    # ---- compute v1 -----------------------------------------------------------------------
    def _api(self, method: str, path: str, query: dict[str, str], body: dict[str, Any]) -> Any:
        if not path.startswith(API):
            raise ApiError(404, "notFound", f"unknown path {path}")
        parts = path[len(API) :].split("/")
        project, rest = parts[0], parts[1:]
        w = self.world
        with w.lock:
            key = self._route(method, rest)
            w.calls[key] += 1
            self.call = key
            if key == "instances.aggregatedList":
                return self._aggregated(project, query)
            if key == "machineTypes.aggregatedList":
                return self._machine_types(project)
            if key == "acceleratorTypes.aggregatedList":
                return self._accelerator_types(project)
            if key == "operations.aggregatedList":
                terms = _filter_terms(query.get("filter", ""))
                items = {
                    f"zones/{z}": {"operations": ops}
                    for z in sorted(WORLD)
                    if (ops := [op for op in w.operations[z].values() if matches(op, terms)])
                }
                return {"kind": "compute#operationAggregatedList", "items": items}
            if key == "regions.list":
                return {
                    "kind": "compute#regionList",
                    "items": [self._region(project, r) for r in sorted({region_of(z) for z in WORLD})],
                }
            if key == "regions.get":
                return self._region(project, rest[1])
            if key == "resourcePolicies.aggregatedList":
                items = {}
                for (r, _n), p in sorted(w.policies.items()):
                    items.setdefault(f"regions/{r}", {"resourcePolicies": []})["resourcePolicies"].append(_public(p))
                return {"kind": "compute#resourcePolicyAggregatedList", "items": items}
            if key.startswith(("resourcePolicies.", "regionOperations.")):
                return self._regional(project, key, rest, query, body)
            zone = rest[1]
            if zone not in WORLD:
                raise ApiError(404, "notFound", f"The resource 'projects/{project}/zones/{zone}' was not found")
            if key == "instances.insert":
                return self._insert(project, zone, query.get("requestId", ""), body)
            if key == "instances.bulkInsert":
                return self._bulk_insert(project, zone, query.get("requestId", ""), body)
            if key == "instances.list":
                terms = _filter_terms(query.get("filter", ""))
                items = [_public(i) for i in w.instances[zone].values() if matches(i, terms)]
                return {"kind": "compute#instanceList", "items": items}
            if key in ("instances.get", "instances.delete", "instances.getSerialPortOutput"):
                inst = w.instances[zone].get(rest[3])
                if inst is None:
                    raise ApiError(
                        404,
                        "notFound",
                        f"The resource 'projects/{project}/zones/{zone}/instances/{rest[3]}' was not found",
                    )
                if key == "instances.get":
                    return _public(inst)
                if key == "instances.getSerialPortOutput":
                    return _serial_port(project, zone, inst, query)
                return self._delete(project, zone, query.get("requestId", ""), inst)
            if key in ("zoneOperations.get", "zoneOperations.wait"):
                op = w.operations[zone].get(rest[3])
                if op is None:
                    raise ApiError(404, "notFound", f"The resource 'operations/{rest[3]}' was not found")
                return op
            if key == "zoneOperations.list":
                terms = _filter_terms(query.get("filter", ""))
                return {
                    "kind": "compute#operationList",
                    "items": [op for op in w.operations[zone].values() if matches(op, terms)],
                }
        raise ApiError(404, "notFound", f"unknown path {path}")

    @staticmethod
    def _route(method: str, rest: list[str]) -> str:
        shape = "/".join(p if i % 2 == 0 else "*" for i, p in enumerate(rest))
        table = {
            ("GET", "aggregated/instances"): "instances.aggregatedList",
            ("GET", "aggregated/machineTypes"): "machineTypes.aggregatedList",
            ("GET", "aggregated/acceleratorTypes"): "acceleratorTypes.aggregatedList",
            ("GET", "aggregated/operations"): "operations.aggregatedList",
            ("GET", "regions"): "regions.list",
            ("GET", "regions/*"): "regions.get",
            ("POST", "zones/*/instances"): "instances.insert",
            ("GET", "zones/*/instances"): "instances.list",
            ("POST", "zones/*/instances/*"): "instances.bulkInsert",
            ("GET", "zones/*/instances/*"): "instances.get",
            ("DELETE", "zones/*/instances/*"): "instances.delete",
            ("GET", "zones/*/instances/*/serialPort"): "instances.getSerialPortOutput",
            ("GET", "zones/*/operations/*"): "zoneOperations.get",
            ("POST", "zones/*/operations/*/wait"): "zoneOperations.wait",
            ("GET", "zones/*/operations"): "zoneOperations.list",
            ("GET", "aggregated/resourcePolicies"): "resourcePolicies.aggregatedList",
            ("POST", "regions/*/resourcePolicies"): "resourcePolicies.insert",
            ("GET", "regions/*/resourcePolicies"): "resourcePolicies.list",
            ("GET", "regions/*/resourcePolicies/*"): "resourcePolicies.get",
            ("DELETE", "regions/*/resourcePolicies/*"): "resourcePolicies.delete",
            ("GET", "regions/*/operations/*"): "regionOperations.get",
            ("POST", "regions/*/operations/*/wait"): "regionOperations.wait",
        }
        # "aggregated/instances" has an odd shape: keep its second segment literal
        literal = "/".join(rest)
        key = table.get((method, literal)) or table.get((method, shape))
        if key == "instances.bulkInsert" and rest[-1] != "bulkInsert":
            key = None
        if key is None:
            raise ApiError(404, "notFound", f"unknown method {method} {literal}")
        return key

    # ---- resource policies (regional) ---------------------------------------------------------
    def _regional(self, project: str, key: str, rest: list[str], query: dict[str, str], body: dict[str, Any]) -> Any:
        w = self.world
        region = rest[1]
        if region not in {region_of(z) for z in WORLD}:
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/regions/{region}' was not found")
        if key in ("regionOperations.get", "regionOperations.wait"):
            op = w.region_operations.get(rest[3])
            if op is None:
                raise ApiError(404, "notFound", f"The resource 'operations/{rest[3]}' was not found")
            return op
        if key == "resourcePolicies.list":
            return {
                "kind": "compute#resourcePolicyList",
                "items": [_public(p) for (r, _), p in sorted(w.policies.items()) if r == region],
            }
        if key == "resourcePolicies.insert":
            name = str(body.get("name") or "")
            if not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name):
                raise ApiError(400, "invalid", f"Invalid value for field 'resource.name': '{name}'.")
            group = body.get("groupPlacementPolicy")
            if group is not None and group.get("collocation", "COLLOCATED") not in (
                "COLLOCATED",
                "UNSPECIFIED_COLLOCATION",
            ):
                raise ApiError(
                    400,
                    "invalid",
                    "Invalid value for field "
                    f"'resource.groupPlacementPolicy.collocation': '{group.get('collocation')}'.",
                )
            prior = w.requests.get((region, query.get("requestId", ""))) if query.get("requestId") else None
            if prior is not None:
                return w.region_operations[prior]
            if (region, name) in w.policies:
                raise ApiError(
                    409,
                    "alreadyExists",
                    f"The resource 'projects/{project}/regions/{region}/resourcePolicies/{name}' already exists",
                )
            link = f"{BASE}{project}/regions/{region}/resourcePolicies/{name}"
            policy = {
                "kind": "compute#resourcePolicy",
                "id": str(next(w.ids)),
                "name": name,
                "creationTimestamp": rfc3339(time.time()),
                "region": f"{BASE}{project}/regions/{region}",
                "description": str(body.get("description") or ""),
                "status": "READY",
                "selfLink": link,
            }
            if group is not None:
                policy["groupPlacementPolicy"] = dict(group)
            w.policies[(region, name)] = policy
            return self._region_operation(project, region, "insert", link, query.get("requestId", ""))
        name = rest[3]
        policy = w.policies.get((region, name))
        if policy is None:
            raise ApiError(
                404,
                "notFound",
                f"The resource 'projects/{project}/regions/{region}/resourcePolicies/{name}' was not found",
            )
        if key == "resourcePolicies.get":
            return _public(policy)
        users = w.policy_users(region, name)
        if users:
            raise ApiError(
                400,
                "resourceInUseByAnotherResource",
                f"The resource_policy resource '{policy['selfLink']}' is already being used by "
                f"'projects/{project}/zones/{users[0][0]}/instances/{users[0][1]}'",
            )
        del w.policies[(region, name)]
        return self._region_operation(project, region, "delete", policy["selfLink"], query.get("requestId", ""))

    def _region_operation(self, project: str, region: str, kind: str, target: str, request_id: str) -> dict[str, Any]:
        w = self.world
        ident = str(next(w.ids))
        now = time.time()
        name = f"operation-{int(now * 1000)}-{ident}"
        op = {
            "kind": "compute#operation",
            "id": ident,
            "name": name,
            "operationType": kind,
            "targetLink": target,
            "region": f"{BASE}{project}/regions/{region}",
            "status": "DONE",
            "progress": 100,
            "insertTime": rfc3339(now),
            "startTime": rfc3339(now),
            "endTime": rfc3339(now),
            "selfLink": f"{BASE}{project}/regions/{region}/operations/{name}",
        }
        w.region_operations[name] = op
        if request_id:
            w.requests[(region, request_id)] = name
        return {**op, "status": "RUNNING", "progress": 0}

    # ---- launch ---------------------------------------------------------------------------
    def _shape(
        self, zone: str, machine: str, scheduling: dict[str, Any], accelerators: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """What a VM of this shape is, validated like GCE does; raises ApiError 400 otherwise."""
        machine = machine.rsplit("/", 1)[-1]
        offered = machines_in(zone)
        if machine not in offered:
            raise ApiError(
                400,
                "invalid",
                f"Invalid value for field 'resource.machineType': '{machine}'. "
                f"Machine type with name '{machine}' does not exist in zone '{zone}'.",
            )
        cpus, mem, accel, gpus = offered[machine]
        for acc in accelerators:
            kind = str(acc.get("acceleratorType", "")).rsplit("/", 1)[-1]
            count = int(acc.get("acceleratorCount", 0))
            if accel or kind not in WORLD[zone][1] or not 0 < count <= ATTACHABLE[kind]:
                raise ApiError(
                    400,
                    "invalid",
                    f"Invalid value for field 'resource.guestAccelerators': "
                    f"'{kind}' x{count} cannot be attached to {machine} in zone '{zone}'.",
                )
            accel, gpus = kind, count
        model = str(scheduling.get("provisioningModel") or "STANDARD")
        if model not in ("SPOT", "STANDARD"):
            raise ApiError(
                400, "invalid", f"Invalid value for field 'resource.scheduling.provisioningModel': '{model}'."
            )
        if gpus and scheduling.get("onHostMaintenance", "MIGRATE") != "TERMINATE":
            raise ApiError(
                400,
                "invalid",
                "Instances with guest accelerators do not support live migration "
                "(scheduling.onHostMaintenance must be TERMINATE).",
            )
        return {"_machine": machine, "_cpus": cpus, "_mem": mem, "_accel": accel, "_gpus": gpus, "_model": model}

    def _front_fault(self, zone: str, machine: str) -> str | None:
        """Synchronous faults raise here; capacity-like ones are returned to fail the operation."""
        kind = self.world.take_fault(zone, machine)
        if kind == "throttle":
            raise ApiError(
                429,
                "rateLimitExceeded",
                "Rate Limit Exceeded: Quota exceeded for quota metric "
                "'Queries' and limit 'Queries per minute' of service 'compute.googleapis.com'.",
            )
        if kind == "server-error":
            raise ApiError(503, "backendError", "Internal error. Please try again or contact Google Support.")
        if kind == "auth":
            raise ApiError(
                403,
                "forbidden",
                f"Required 'compute.instances.create' permission for 'projects/fake/zones/{zone}/instances'",
            )
        if kind == "quota":
            raise ApiError(403, "quotaExceeded", f"Quota 'CPUS' exceeded.  Limit: 0.0 in region {region_of(zone)}.")
        return kind

    def _replayed(self, project: str, zone: str, request_id: str) -> dict[str, Any] | None:
        if not request_id:
            return None
        name = self.world.requests.get((zone, request_id))
        return self.world.operations[zone].get(name) if name else None

    def _insert(self, project: str, zone: str, request_id: str, body: dict[str, Any]) -> dict[str, Any]:
        prior = self._replayed(project, zone, request_id)
        if prior is not None:
            return prior
        name = str(body.get("name") or "")
        if not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name):
            raise ApiError(400, "invalid", f"Invalid value for field 'resource.name': '{name}'.")
        shape = self._shape(
            zone, str(body.get("machineType", "")), body.get("scheduling") or {}, body.get("guestAccelerators") or []
        )
        kind = self._front_fault(zone, shape["_machine"])
        if name in self.world.instances[zone]:
            raise ApiError(
                409, "alreadyExists", f"The resource 'projects/{project}/zones/{zone}/instances/{name}' already exists"
            )
        policies = self.world.check_policies(project, zone, body.get("resourcePolicies") or [], 1)
        body = {**body, "resourcePolicies": policies} if policies else body
        now = time.time()
        try:
            if kind in ("capacity", "quota-op"):
                raise _fault_of(kind, zone, shape["_machine"])
            room = self.world.room(zone, shape["_machine"], shape["_model"])
            if room is not None and room < 1:
                raise _fault_of("capacity", zone, shape["_machine"])
            self.world.check_quota(zone, shape, 1)
        except Fault as fault:
            return self._operation(project, zone, "insert", {"name": name}, fault, now, request_id)
        inst = self._create(project, zone, name, shape, body)
        return self._operation(project, zone, "insert", inst, None, now, request_id)

    def _bulk_insert(self, project: str, zone: str, request_id: str, body: dict[str, Any]) -> dict[str, Any]:
        prior = self._replayed(project, zone, request_id)
        if prior is not None:
            return prior
        props = body.get("instanceProperties") or {}
        shape = self._shape(
            zone, str(props.get("machineType", "")), props.get("scheduling") or {}, props.get("guestAccelerators") or []
        )
        count = int(body.get("count") or 0)
        min_count = int(body.get("minCount") or count)
        names = list(body.get("perInstanceProperties") or {})
        pattern = body.get("namePattern") or ""
        if count < 1 or not 1 <= min_count <= count or (not names and "#" not in pattern):
            raise ApiError(
                400, "invalid", "bulkInsert needs count >= minCount >= 1 and a namePattern or perInstanceProperties"
            )
        kind = self._front_fault(zone, shape["_machine"])
        vms = self.world.instances[zone]
        policies = self.world.check_policies(
            project, zone, props.get("resourcePolicies") or [], len([n for n in names if n not in vms]) or count
        )
        props = {**props, "resourcePolicies": policies} if policies else props
        wanted = [n for n in names if n not in vms][:count] if names else []
        if pattern:
            hashes = re.search(r"#+", pattern)
            assert hashes is not None
            regex = re.escape(pattern[: hashes.start()]) + r"(\d+)" + re.escape(pattern[hashes.end() :])
            taken = [int(m.group(1)) for n in vms if (m := re.fullmatch(regex, n))]
            start = max(taken, default=0) + 1
            width = hashes.end() - hashes.start()
            while len(wanted) < count:
                wanted.append(f"{pattern[: hashes.start()]}{start:0{width}d}{pattern[hashes.end() :]}")
                start += 1
        existing = len(names) - len([n for n in names if n not in vms]) if names else 0
        now = time.time()
        room = self.world.room(zone, shape["_machine"], shape["_model"])
        fit = len(wanted) if room is None else min(len(wanted), room)
        cause = None
        if kind in ("capacity", "quota-op"):
            fit, cause = 0, _fault_of(kind, zone, shape["_machine"])
        elif fit < len(wanted):
            cause = _fault_of("capacity", zone, shape["_machine"])
        try:
            if fit + existing < min_count:
                errors = [
                    {
                        "code": "VM_MIN_COUNT_NOT_REACHED",
                        "message": f"Requested minimum count of {min_count} VMs could not be created.",
                    }
                ]
                raise Fault(errors + (cause.errors if cause else []), 503, "SERVICE UNAVAILABLE")
            self.world.check_quota(zone, shape, fit)
        except Fault as fault:
            return self._operation(
                project,
                zone,
                "bulkInsert",
                {"name": pattern or names[0]},
                fault,
                now,
                request_id,
                status={"createdVmCount": 0, "failedToCreateVmCount": len(wanted), "targetVmCount": count},
            )
        for name in wanted[:fit]:
            per = (body.get("perInstanceProperties") or {}).get(name) or {}
            self._create(project, zone, name, shape, {**props, **per, "name": name})
        return self._operation(
            project,
            zone,
            "bulkInsert",
            {"name": pattern or names[0]},
            None,
            now,
            request_id,
            status={"createdVmCount": fit, "failedToCreateVmCount": len(wanted) - fit, "targetVmCount": count},
        )

    def _create(
        self, project: str, zone: str, name: str, shape: dict[str, Any], body: dict[str, Any]
    ) -> dict[str, Any]:
        now = time.time()
        ident = str(next(self.world.ids))
        inst = {
            "kind": "compute#instance",
            "id": ident,
            "name": name,
            "creationTimestamp": rfc3339(now),
            "zone": f"{BASE}{project}/zones/{zone}",
            "machineType": f"{BASE}{project}/zones/{zone}/machineTypes/{shape['_machine']}",
            "status": "RUNNING",
            "labels": dict(body.get("labels") or {}),
            "metadata": {
                "kind": "compute#metadata",
                "fingerprint": "AAAA",
                "items": list((body.get("metadata") or {}).get("items") or []),
            },
            "scheduling": dict(body.get("scheduling") or {}),
            "guestAccelerators": list(body.get("guestAccelerators") or []),
            "labelFingerprint": "42WmSpB8rSM=",
            "selfLink": f"{BASE}{project}/zones/{zone}/instances/{name}",
            **shape,
        }
        if body.get("resourcePolicies"):
            inst["resourcePolicies"] = list(body["resourcePolicies"])
            for link in inst["resourcePolicies"]:
                policy = self.world.policies.get((region_of(zone), link.rsplit("/", 1)[-1]))
                if policy is not None and policy.get("groupPlacementPolicy"):
                    policy.setdefault("_zone", zone)
        self.world.instances[zone][name] = inst
        return inst

    def _delete(self, project: str, zone: str, request_id: str, inst: dict[str, Any]) -> dict[str, Any]:
        prior = self._replayed(project, zone, request_id)
        if prior is not None:
            return prior
        now = time.time()
        inst["status"] = "TERMINATED"
        self.world.ended.append(self.world.instances[zone].pop(inst["name"]))
        return self._operation(project, zone, "delete", inst, None, now, request_id)

    def _operation(
        self,
        project: str,
        zone: str,
        kind: str,
        target: dict[str, Any],
        fault: Fault | None,
        now: float,
        request_id: str = "",
        status: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        ident = str(next(self.world.ids))
        name = f"operation-{int(now * 1000)}-{ident}"
        op: dict[str, Any] = {
            "kind": "compute#operation",
            "id": ident,
            "name": name,
            "operationType": kind,
            "zone": f"{BASE}{project}/zones/{zone}",
            "targetLink": f"{BASE}{project}/zones/{zone}/instances/{target.get('name', '')}",
            "status": "DONE",
            "progress": 100,
            "user": "fake@spotfleet.test",
            "insertTime": rfc3339(now),
            "startTime": rfc3339(now),
            "endTime": rfc3339(time.time()),
            "selfLink": f"{BASE}{project}/zones/{zone}/operations/{name}",
        }
        if "id" in target:
            op["targetId"] = target["id"]
        if fault is not None:
            op["error"] = {"errors": fault.errors}
            op["httpErrorStatusCode"], op["httpErrorMessage"] = fault.http_status, fault.http_message
        if status is not None:
            op["instancesBulkInsertOperationMetadata"] = {
                "perLocationStatus": {
                    f"zones/{zone}": {**status, "status": "DONE" if fault is None else "FAILED", "deletedVmCount": 0}
                }
            }
        self.world.operations[zone][name] = op
        if request_id:
            self.world.requests[(zone, request_id)] = name
        if kind == PREEMPTED:
            return op
        # the call itself answers while the operation still runs: clients must wait for it
        running = {
            k: v
            for k, v in op.items()
            if k
            not in (
                "error",
                "httpErrorStatusCode",
                "httpErrorMessage",
                "endTime",
                "instancesBulkInsertOperationMetadata",
            )
        }
        return {**running, "status": "RUNNING", "progress": 0}

    # ---- lists ------------------------------------------------------------------------------
    def _aggregated(self, project: str, query: dict[str, str]) -> dict[str, Any]:
        terms = _filter_terms(query.get("filter", ""))
        rows = [(z, _public(i)) for z in sorted(WORLD) for i in self.world.instances[z].values() if matches(i, terms)]
        size = int(query.get("maxResults") or 500)
        start = int(query.get("pageToken") or 0)
        page = rows[start : start + size]
        items: dict[str, Any] = {}
        for zone, inst in page:
            items.setdefault(f"zones/{zone}", {"instances": []})["instances"].append(inst)
        out: dict[str, Any] = {
            "kind": "compute#instanceAggregatedList",
            "id": f"projects/{project}/aggregated/instances",
            "items": items,
            "selfLink": f"{BASE}{project}/aggregated/instances",
        }
        if start + size < len(rows):
            out["nextPageToken"] = str(start + size)
        return out

    def _machine_types(self, project: str) -> dict[str, Any]:
        items: dict[str, Any] = {}
        for zone in sorted(WORLD):
            rows = []
            for name, (cpus, mem, accel, gpus) in sorted(machines_in(zone).items()):
                row: dict[str, Any] = {
                    "kind": "compute#machineType",
                    "id": str(abs(hash(name)) % 10**9),
                    "name": name,
                    "guestCpus": cpus,
                    "memoryMb": mem,
                    "zone": zone,
                    "selfLink": f"{BASE}{project}/zones/{zone}/machineTypes/{name}",
                }
                if accel:
                    row["accelerators"] = [{"guestAcceleratorType": accel, "guestAcceleratorCount": gpus}]
                rows.append(row)
            items[f"zones/{zone}"] = {"machineTypes": rows}
        return {"kind": "compute#machineTypeAggregatedList", "items": items}

    def _accelerator_types(self, project: str) -> dict[str, Any]:
        items: dict[str, Any] = {}
        for zone in sorted(WORLD):
            rows = [
                {
                    "kind": "compute#acceleratorType",
                    "id": str(abs(hash(name)) % 10**9),
                    "name": name,
                    "description": name,
                    "maximumCardsPerInstance": most,
                    "zone": f"{BASE}{project}/zones/{zone}",
                }
                for name, most in sorted(ATTACHABLE.items())
                if name in WORLD[zone][1]
            ]
            items[f"zones/{zone}"] = {"acceleratorTypes": rows}
        return {"kind": "compute#acceleratorTypeAggregatedList", "items": items}

    def _region(self, project: str, region: str) -> dict[str, Any]:
        zones = [z for z in sorted(WORLD) if region_of(z) == region]
        if not zones:
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/regions/{region}' was not found")
        return {
            "kind": "compute#region",
            "id": str(abs(hash(region)) % 10**9),
            "name": region,
            "status": "UP",
            "zones": [f"{BASE}{project}/zones/{z}" for z in zones],
            "quotas": self.world.quota_list(region),
            "selfLink": f"{BASE}{project}/regions/{region}",
        }


def _fault_of(kind: str, zone: str, machine: str) -> Fault:
    if kind == "quota-op":
        metric = "GPUS_ALL_REGIONS"
        return Fault(
            [{"code": "QUOTA_EXCEEDED", "message": f"Quota '{metric}' exceeded.  Limit: 0.0 globally."}],
            403,
            "FORBIDDEN",
        )
    return Fault(
        [
            {
                "code": "ZONE_RESOURCE_POOL_EXHAUSTED",
                "message": f"The zone 'projects/fake/zones/{zone}' does not have enough resources available "
                f"to fulfill the request.  Try a different zone, or try again later. ({machine})",
            }
        ],
        503,
        "SERVICE UNAVAILABLE",
    )


def _serial_port(project: str, zone: str, inst: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
    """``compute#serialPortOutput``: port 1 holds the boot lines and the ``console`` control's text;
    ``start`` is a byte offset (a negative one counts from the end, as GCE allows)."""
    port = int(query.get("port", "1") or 1)
    if not 1 <= port <= 4:
        raise ApiError(400, "invalid", f"Invalid value for field 'port': '{port}'. Must be between 1 and 4.")
    text = (
        (
            f"[    0.000000] Linux version 6.8.0-gcp (fake)\n[    1.200000] {inst['name']} login:\n"
            + inst.get("_console", "")
        )
        if port == 1
        else ""
    )
    data = text.encode()
    start = int(query.get("start", "0") or 0)
    start = max(0, len(data) + start) if start < 0 else min(start, len(data))
    return {
        "kind": "compute#serialPortOutput",
        "contents": data[start:].decode(errors="replace"),
        "start": str(start),
        "next": str(len(data)),
        "selfLink": f"{BASE}{project}/zones/{zone}/instances/{inst['name']}/serialPort",
    }


def _public(inst: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in inst.items() if not k.startswith("_")}


class GceServer:
    """The fake on a background thread: ``GceServer().start()``; ``url``; ``stop()``."""

    def __init__(self, port: int = 0, latency: float = 0.0, host: str = "127.0.0.1"):
        self.world = GceWorld(latency)
        handler = type("BoundHandler", (Handler,), {"world": self.world})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> GceServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def control(url: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """Call the control API of a fake at ``url`` (GET when ``body`` is None)."""
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"{url}/_fake/{path}",
        data=data,
        method="GET" if body is None else "POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every API call")
    args = parser.parse_args()
    server = GceServer(args.port, args.latency, args.host)
    print(f"fake Compute Engine on {server.url} (SPOTFLEET_GCE_ENDPOINT={server.url})", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
