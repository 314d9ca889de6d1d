"""A local fake of the Lambda Cloud API (v1), written from the vendor's public API reference.

Sources (read 2026-12-02): the Lambda Cloud API reference https://docs-api.lambda.ai/api/cloud
(OpenAPI document "Lambda Cloud API" version 1.8.3: operations ``listInstanceTypes``,
``launchInstance``, ``terminateInstance``, ``listInstances``, ``getInstance``, ``listSSHKeys``,
``addSSHKey``, ``deleteSSHKey``; the schemas ``InstanceLaunchRequest``, ``Instance``,
``InstanceStatus``, ``InstanceTypesItem``, ``PublicRegionCode``, ``RequestedTagEntry`` and the
``ApiError*`` bodies), and the guides https://docs.lambda.ai/public-cloud/on-demand/creating-managing-instances/
(new accounts have an instance quota) and https://docs.lambda.ai/public-cloud/cloud-api/ (rate limits).
Runs on its own (``python -m tests.fakes.lambda_server --port 8791``) or in a test
(``LambdaServer(port=0).start()``). Under ``/api/v1``:

- ``GET instance-types``              ``{"data": {name: {"instance_type": {name, description,
  gpu_description, price_cents_per_hour, specs: {vcpus, memory_gib, storage_gib, gpus}},
  "regions_with_capacity_available": [{name, description}]}}}``: a region is listed only while
  the type has capacity there now.
- ``POST instance-operations/launch`` body ``region_name``, ``instance_type_name``,
  ``ssh_key_names`` (required: exactly one, an existing key's name), ``quantity`` (default 1),
  ``name`` (64 characters at most), ``hostname``, ``image``, ``user_data`` (cloud-init, plain
  text, 1 MB at most), ``tags`` (``[{key, value}]``, key ``^[a-z][a-z0-9-:]+$`` up to 55,
  value up to 128), ``file_system_names`` -> ``{"data": {"instance_ids": [...]}}``. All or
  nothing: a quantity the region cannot hold is ``insufficient-capacity`` and launches none.
- ``POST instance-operations/terminate`` ``{"instance_ids": [...]}`` -> ``{"data":
  {"terminated_instances": [Instance...]}}``; an id that is not (or no longer) the account's
  fails the whole call with 404 ``global/object-does-not-exist`` and terminates nothing.
- ``GET instances`` -> ``{"data": [Instance...]}``; ``GET instances/{id}`` -> ``{"data": Instance}``.
- ``GET ssh-keys``, ``POST ssh-keys`` (``{name, public_key?}``; no public key: a pair is made and
  ``private_key`` returned), ``DELETE ssh-keys/{id}``.

Auth is ``Authorization: Bearer <key>`` or HTTP Basic (``<key>:``, base64; or the bare key).
Errors are ``{"error": {"code", "message", "suggestion"}}``: 401 ``global/invalid-api-key``,
403 ``global/account-inactive``, 400 ``global/invalid-parameters``, 400
``instance-operations/launch/insufficient-capacity``, 400 ``global/quota-exceeded`` (the
account's instance quota), 404 ``global/object-does-not-exist`` (an unknown type or SSH key on
launch; an unknown instance), 500 ``global/internal-error``, 503 ``provider/internal-unavailable``.
Rate limits: the reference says about one request a second, and one launch per 12 seconds
(five a minute). It documents neither the status nor the body of a refusal: this fake answers
429 with code ``global/too-many-requests`` (inferred; SkyPilot's client treats 429 as the
limit) and a ``Retry-After`` header only when ``retry_after`` is configured. The launch limit
is off unless ``launch_interval`` is set (tests stay fast).

Instances go ``booting`` -> ``active`` after ``boot_seconds`` and ``terminating`` ->
gone after ``terminate_seconds``. Every answer can be delayed by ``latency``.

Control API for tests (no auth), under ``/_control/``: ``POST reset`` (``{"types": [...],
"capacity": {...}}`` optional), ``POST capacity`` (``{"type": t, "region": r, "count": n}``: how
many more instances that pool can take), ``POST faults`` (``{"target": "launch"|"list"|"types"|
"terminate"|"keys"|"*", "kind": "throttle"|"server-error"|"unavailable"|"auth"|"inactive"|"quota"|
"capacity"|"hostile", "count": n}``; ``hostile`` answers 400 with a message echoing the request's
``Authorization`` header, terminal escapes and a forged line), the malformed-200 fault
``{"target": "list"|"types"|"launch"|"keys", "kind": "malformed", "variant": "truncated"|"html"|
"empty"|"wrong-types", "count": n}`` (``tests/fakes/malformed.py``), ``POST faults/clear``,
``POST config`` (``latency``, ``boot_seconds``, ``terminate_seconds``, ``launch_interval``,
``retry_after``, ``quota``), ``POST foreign`` (instances this API key owns but spotfleet did not
start: ``{"type", "region", "name", "tags", "count"}``), ``GET instances`` (every instance ever
launched, terminated too, with its launch body) and ``GET calls`` (API calls per route).
"""

from __future__ import annotations

import base64
import re
import secrets
import threading
import time
from typing import Any

try:
    import malformed
    from serving import BackgroundServer, JsonHandler, serve_main
except ImportError:  # imported as tests.fakes.lambda_server
    from . import malformed
    from .serving import BackgroundServer, JsonHandler, serve_main

API_KEY = "secret_fake-lambda_0123456789abcdef"

#: ``PublicRegionCode`` of the reference (1.8.3), with the descriptions its examples use.
REGIONS: dict[str, str] = {
    "europe-central-1": "Germany",
    "asia-south-1": "India",
    "australia-east-1": "Australia",
    "me-west-1": "Israel",
    "asia-northeast-1": "Tokyo, Japan",
    "asia-northeast-2": "Seoul, South Korea",
    "us-east-1": "Virginia, USA",
    "us-west-2": "Arizona, USA",
    "us-west-1": "California, USA",
    "us-south-1": "Texas, USA",
    "us-west-3": "Utah, USA",
    "us-midwest-1": "Illinois, USA",
    "us-east-2": "Washington DC, USA",
    "us-south-2": "North Texas, USA",
    "us-south-3": "Central Texas, USA",
    "us-east-3": "Virginia 2, USA",
    "us-midwest-2": "Ohio, USA",
}

#: Instance types served when none are configured (prices as Lambda lists them, in cents/hour).
SEED_TYPES: list[dict[str, Any]] = [
    {
        "name": "gpu_1x_a10",
        "description": "1x A10 (24 GB PCIe)",
        "gpu_description": "A10 (24 GB PCIe)",
        "price_cents_per_hour": 75,
        "specs": {"vcpus": 30, "memory_gib": 200, "storage_gib": 1400, "gpus": 1},
    },
    {
        "name": "gpu_1x_h100_pcie",
        "description": "1x H100 (80 GB PCIe)",
        "gpu_description": "H100 (80 GB PCIe)",
        "price_cents_per_hour": 249,
        "specs": {"vcpus": 26, "memory_gib": 200, "storage_gib": 1000, "gpus": 1},
    },
    {
        "name": "gpu_8x_h100_sxm5",
        "description": "8x H100 (80 GB SXM5)",
        "gpu_description": "H100 (80 GB SXM5)",
        "price_cents_per_hour": 2392,
        "specs": {"vcpus": 208, "memory_gib": 1800, "storage_gib": 24780, "gpus": 8},
    },
    {
        "name": "gpu_1x_gh200",
        "description": "1x GH200 (96 GB)",
        "gpu_description": "GH200 (96 GB)",
        "price_cents_per_hour": 149,
        "specs": {"vcpus": 64, "memory_gib": 432, "storage_gib": 4096, "gpus": 1},
    },
    {
        "name": "gpu_8x_a100_80gb_sxm4",
        "description": "8x A100 (80 GB SXM4)",
        "gpu_description": "A100 (80 GB SXM4)",
        "price_cents_per_hour": 1432,
        "specs": {"vcpus": 240, "memory_gib": 1800, "storage_gib": 19500, "gpus": 8},
    },
]

#: (type, region) -> instances that pool can still take, when none is configured.
SEED_CAPACITY: dict[str, int] = {
    "gpu_1x_a10/us-east-1": 30,
    "gpu_1x_a10/us-west-1": 4,
    "gpu_1x_h100_pcie/us-west-3": 30,
    "gpu_1x_h100_pcie/us-south-1": 2,
    "gpu_8x_h100_sxm5/us-east-3": 3,
    "gpu_1x_gh200/us-east-3": 30,
    "gpu_8x_a100_80gb_sxm4/europe-central-1": 1,
}

ERRORS: dict[str, tuple[int, str, str, str]] = {  # fault kind -> status, code, message, suggestion
    "throttle": (429, "global/too-many-requests", "Too many requests.", "Slow down and try again."),
    "server-error": (
        500,
        "global/internal-error",
        "An internal server error occurred.",
        "Try again later. Contact Support if the problem persists.",
    ),
    "unavailable": (503, "provider/internal-unavailable", "Provider unavailable", "Try again shortly"),
    "auth": (
        401,
        "global/invalid-api-key",
        "API key was invalid, expired, or deleted.",
        "Check your API key or create a new one, then try again.",
    ),
    "inactive": (
        403,
        "global/account-inactive",
        "Your account is inactive.",
        "Make sure you have verified your email address and have a valid payment method.",
    ),
    "quota": (400, "global/quota-exceeded", "Quota exceeded.", "Contact Support to increase your quota."),
    "capacity": (
        400,
        "instance-operations/launch/insufficient-capacity",
        "Not enough capacity to fulfill launch request.",
        "Try a different region or instance type.",
    ),
    "hostile": (
        400,
        "global/invalid-parameters",
        "rejected request with Authorization: {authorization} (key {key})"
        "\x1b]0;pwned\x07\x1b[2J\r\nfake line: fleet is up",
        "",
    ),
}

#: The "wrong-types" malformed body per target: the answer's shape with a wrong type inside.
WRONG_TYPES = {
    "list": b'{"data": {"id": "0920582c7ff041399e34823a0be62549", "status": "active"}}',
    "types": b'{"data": [{"instance_type": "gpu_1x_a10"}]}',
    "launch": b'{"data": {"instance_ids": "0920582c7ff041399e34823a0be62549"}}',
    "keys": b'{"data": {"name": "spotfleet"}}',
}

TAG_KEY = re.compile(r"^[a-z][a-z0-9-:]+$")
HOSTNAME = re.compile(r"^[a-z0-9][0-9a-z-]{0,62}$")
MAX_USER_DATA = 1_000_000


class State:
    """Everything the fake knows; every method runs under ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.latency = 0.0
        self.boot_seconds = 0.0
        self.terminate_seconds = 0.0
        self.launch_interval = 0.0
        self.retry_after: float | None = None
        self.quota = 50
        self.reset()

    def reset(self, types: list[dict[str, Any]] | None = None, capacity: dict[str, int] | None = None) -> None:
        with self.lock:
            self.types = {t["name"]: t for t in (SEED_TYPES if types is None else types)}
            self.capacity = dict(SEED_CAPACITY if capacity is None else capacity)
            self.instances: dict[str, dict[str, Any]] = {}
            self.keys: dict[str, dict[str, Any]] = {}
            self.faults: list[dict[str, Any]] = []
            self.calls: dict[str, int] = {}
            self.last_launch = 0.0

    def take_fault(self, targets: tuple[str, ...]) -> dict[str, Any] | None:
        for fault in self.faults:
            if fault["count"] > 0 and fault["target"] in targets:
                fault["count"] -= 1
                return fault
        return None

    def advance(self, inst: dict[str, Any]) -> None:
        """Move ``inst`` along its states by the clock."""
        now = time.time()
        if inst["status"] == "booting" and now - inst["_launched"] >= self.boot_seconds:
            inst["status"] = "active"
        if inst["status"] == "terminating" and now - inst["_ended"] >= self.terminate_seconds:
            inst["status"] = "terminated"

    def live(self) -> list[dict[str, Any]]:
        for inst in self.instances.values():
            self.advance(inst)
        return [i for i in self.instances.values() if i["status"] != "terminated"]

    def row(self, inst: dict[str, Any]) -> dict[str, Any]:
        row = {k: v for k, v in inst.items() if not k.startswith("_")}
        if inst["status"] == "booting":  # no address until the machine is up
            row.pop("ip", None)
            row.pop("private_ip", None)
        return row

    def make_instance(
        self, type_name: str, region: str, name: str | None, key: str, tags: list[dict[str, str]], body: dict[str, Any]
    ) -> str:
        iid = secrets.token_hex(16)
        n = len(self.instances) + 2
        t = self.types[type_name]
        alive = {"available": True}
        self.instances[iid] = {
            "id": iid,
            **({"name": name} if name is not None else {}),
            "ip": f"198.51.100.{n % 250}",
            "private_ip": f"10.0.{n // 250}.{n % 250}",
            "status": "booting",
            "ssh_key_names": [key],
            "file_system_names": list(body.get("file_system_names") or []),
            "region": {"name": region, "description": REGIONS[region]},
            "instance_type": dict(t),
            "hostname": body.get("hostname") or f"198-51-100-{n % 250}",
            "jupyter_token": secrets.token_hex(16),
            "jupyter_url": f"https://jupyter-{iid}.lambdaspaces.com/",
            "is_reserved": False,
            "actions": {a: dict(alive) for a in ("migrate", "rebuild", "restart", "cold_reboot", "terminate")},
            "tags": [{"key": x["key"], "value": x["value"]} for x in tags],
            "_launched": time.time(),
            "_ended": None,
            "_body": body,
        }
        return iid


def _basic_key(value: str) -> str:
    try:
        decoded = base64.b64decode(value, validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return value  # the reference also accepts the bare key after "Basic "
    return decoded[:-1] if decoded.endswith(":") else decoded


class Handler(JsonHandler):
    server_version = "fake-lambda/1"
    WRONG_TYPES = WRONG_TYPES
    state: State

    def _ok(self, data: Any, broken: dict[str, Any] | None = None) -> None:
        self._send(200, {"data": data}, broken=broken)

    def _error(self, status: int, code: str, message: str, suggestion: str = "") -> None:
        err = {"code": code, "message": message, **({"suggestion": suggestion} if suggestion else {})}
        headers = None
        if status == 429 and self.state.retry_after is not None:
            headers = {"Retry-After": str(self.state.retry_after)}
        self._send(status, {"error": err}, headers)

    def _invalid(self, message: str) -> None:
        self._error(400, "global/invalid-parameters", message, "Check the request body and try again.")

    def _fault(self, fault: dict[str, Any]) -> None:
        status, code, message, suggestion = ERRORS[fault["kind"]]
        if fault["kind"] == "hostile":
            auth = self.headers.get("Authorization") or ""
            message = message.format(authorization=auth, key=auth.split(" ", 1)[-1])
        self._error(status, code, message, suggestion)

    def _authed(self) -> bool:
        scheme, _, value = (self.headers.get("Authorization") or "").partition(" ")
        key = value if scheme == "Bearer" else _basic_key(value) if scheme == "Basic" else ""
        if key == API_KEY:
            return True
        self._fault({"kind": "auth"})
        return False

    def _route(self, method: str) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        parts = [p for p in path.split("/") if p]
        body = self._body() if method in ("POST", "PUT", "PATCH") else {}
        if parts[:1] == ["_control"]:
            return self._control(method, parts[1:], body if isinstance(body, dict) else {})
        if body is None:
            return self._invalid("The request body is not valid JSON.")
        with self.state.lock:
            latency = self.state.latency
            named = parts[:3] + (["{id}"] if len(parts) > 3 and parts[2] in ("instances", "ssh-keys") else parts[3:])
            route = f"{method} /{'/'.join(named)}"
            self.state.calls[route] = self.state.calls.get(route, 0) + 1
        if latency:
            time.sleep(latency)
        with self.state.lock:
            fault = self.state.take_fault(("*",))
            if fault is not None:
                return self._fault(fault)
            if parts[:2] != ["api", "v1"]:
                return self._error(404, "global/object-does-not-exist", f"no route {method} {path}")
            if not self._authed():
                return None
            rest = parts[2:]
            if method == "GET" and rest == ["instance-types"]:
                return self._types()
            if method == "POST" and rest == ["instance-operations", "launch"]:
                return self._launch(body)
            if method == "POST" and rest == ["instance-operations", "terminate"]:
                return self._terminate(body)
            if method == "GET" and rest == ["instances"]:
                return self._list()
            if method == "GET" and len(rest) == 2 and rest[0] == "instances":
                return self._show(rest[1])
            if rest == ["ssh-keys"] and method in ("GET", "POST"):
                return self._list_keys() if method == "GET" else self._add_key(body)
            if method == "DELETE" and len(rest) == 2 and rest[0] == "ssh-keys":
                return self._delete_key(rest[1])
            return self._error(404, "global/object-does-not-exist", f"no route {method} {path}")

    def _pending(self, target: str) -> tuple[dict[str, Any] | None, bool]:
        """A fault due on ``target``: (fault, answered) where answered means the error was sent."""
        fault = self.state.take_fault((target,))
        if fault is not None and fault["kind"] != "malformed":
            self._fault(fault)
            return fault, True
        return fault, False

    # ---- the API ----------------------------------------------------------------------------
    def _types(self) -> None:
        fault, answered = self._pending("types")
        if answered:
            return
        data = {}
        for name, t in self.state.types.items():
            regions = [r for r in REGIONS if self.state.capacity.get(f"{name}/{r}", 0) > 0]
            data[name] = {
                "instance_type": dict(t),
                "regions_with_capacity_available": [{"name": r, "description": REGIONS[r]} for r in regions],
            }
        self._ok(data, fault)

    def _launch(self, body: Any) -> None:
        st = self.state
        fault, answered = self._pending("launch")
        if answered:
            return
        if not isinstance(body, dict):
            return self._invalid("The request body must be an object.")
        now = time.time()
        if st.launch_interval and now - st.last_launch < st.launch_interval:
            return self._fault({"kind": "throttle"})
        for field in ("region_name", "instance_type_name", "ssh_key_names"):
            if field not in body:
                return self._invalid(f"Field '{field}' is required.")
        region, type_name, keys = body["region_name"], body["instance_type_name"], body["ssh_key_names"]
        quantity = body.get("quantity", 1)
        if region not in REGIONS:
            return self._invalid(f"Field 'region_name': '{region}' is not a valid region.")
        if not isinstance(keys, list) or len(keys) != 1 or not isinstance(keys[0], str):
            return self._invalid("Field 'ssh_key_names': exactly one SSH key must be specified.")
        if not isinstance(quantity, int) or isinstance(quantity, bool) or quantity < 1:
            return self._invalid("Field 'quantity' must be a positive integer.")
        name = body.get("name")
        if name is not None and (not isinstance(name, str) or len(name) > 64):
            return self._invalid("Field 'name' must be 64 characters or fewer.")
        if "hostname" in body and not (isinstance(body["hostname"], str) and HOSTNAME.match(body["hostname"])):
            return self._invalid("Field 'hostname' is not a valid hostname.")
        user_data = body.get("user_data")
        if user_data is not None and (not isinstance(user_data, str) or len(user_data.encode()) > MAX_USER_DATA):
            return self._invalid("Field 'user_data' must be plain text of at most 1MB.")
        tags = body.get("tags") or []
        if not isinstance(tags, list) or not all(
            isinstance(t, dict)
            and isinstance(t.get("key"), str)
            and isinstance(t.get("value"), str)
            and TAG_KEY.match(t["key"])
            and len(t["key"]) <= 55
            and len(t["value"]) <= 128
            for t in tags
        ):
            return self._invalid(
                "Field 'tags': each tag needs a key matching ^[a-z][a-z0-9-:]+$ (at most 55 "
                "characters) and a value of at most 128 characters."
            )
        if type_name not in st.types:
            return self._error(
                404,
                "global/object-does-not-exist",
                f"Instance type '{type_name}' does not exist.",
                "Choose an instance type from the list of available instance types.",
            )
        if not any(k["name"] == keys[0] for k in st.keys.values()):
            return self._error(
                404,
                "global/object-does-not-exist",
                f"SSH key '{keys[0]}' does not exist.",
                "Add the SSH key to your account, or choose one of your SSH keys.",
            )
        if fault is None or fault["kind"] != "malformed":
            if len(st.live()) + quantity > st.quota:
                return self._fault({"kind": "quota"})
            if st.capacity.get(f"{type_name}/{region}", 0) < quantity:
                return self._fault({"kind": "capacity"})
        st.capacity[f"{type_name}/{region}"] = st.capacity.get(f"{type_name}/{region}", 0) - quantity
        st.last_launch = now
        ids = [st.make_instance(type_name, region, name, keys[0], tags, body) for _ in range(quantity)]
        self._ok({"instance_ids": ids}, fault)

    def _terminate(self, body: Any) -> None:
        st = self.state
        _, answered = self._pending("terminate")
        if answered:
            return
        ids = body.get("instance_ids") if isinstance(body, dict) else None
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            return self._invalid("Field 'instance_ids' must be a non-empty list of instance IDs.")
        live = {i["id"]: i for i in st.live()}
        for iid in ids:
            if iid not in live or live[iid]["status"] == "terminating":
                return self._error(404, "global/object-does-not-exist", "Specified instance does not exist.")
        done = []
        for iid in dict.fromkeys(ids):
            inst = live[iid]
            inst.update(status="terminating", _ended=time.time())
            key = f"{inst['instance_type']['name']}/{inst['region']['name']}"
            st.capacity[key] = st.capacity.get(key, 0) + 1
            for action in inst["actions"].values():
                action.update(available=False, reason_code="vm-is-terminating")
            st.advance(inst)
            done.append(st.row(inst))
        self._ok({"terminated_instances": done})

    def _list(self) -> None:
        fault, answered = self._pending("list")
        if answered:
            return
        self._ok([self.state.row(i) for i in self.state.live()], fault)

    def _show(self, iid: str) -> None:
        inst = next((i for i in self.state.live() if i["id"] == iid), None)
        if inst is None:
            return self._error(404, "global/object-does-not-exist", "Specified instance does not exist.")
        self._ok(self.state.row(inst))

    def _list_keys(self) -> None:
        fault, answered = self._pending("keys")
        if answered:
            return
        self._ok(list(self.state.keys.values()), fault)

    def _add_key(self, body: Any) -> None:
        _, answered = self._pending("keys")
        if answered:
            return
        name = body.get("name") if isinstance(body, dict) else None
        if not isinstance(name, str) or not 1 <= len(name) <= 64:
            return self._invalid("Field 'name' must be 1 to 64 characters.")
        if any(k["name"] == name for k in self.state.keys.values()):
            return self._invalid(f"An SSH key named '{name}' already exists.")
        public = body.get("public_key")
        generated = public is None
        if generated:
            public = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA" + secrets.token_urlsafe(32) + " generated"
        if (
            not isinstance(public, str)
            or not 1 <= len(public) <= 4096
            or public.split(" ", 1)[0] not in ("ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256")
        ):
            return self._invalid("Field 'public_key' is not a valid SSH public key.")
        key = {"id": secrets.token_hex(16), "name": name, "public_key": public}
        self.state.keys[key["id"]] = key
        answer = (
            {**key, "private_key": "-----BEGIN RSA PRIVATE KEY-----\nfake\n-----END RSA PRIVATE KEY-----\n"}
            if generated
            else key
        )
        self._ok(answer)

    def _delete_key(self, key_id: str) -> None:
        if key_id not in self.state.keys:
            return self._invalid("Specified SSH key does not exist.")
        del self.state.keys[key_id]
        self._ok({})

    # ---- control ----------------------------------------------------------------------------
    def _control(self, method: str, parts: list[str], body: dict[str, Any]) -> None:
        st = self.state
        with st.lock:
            if parts == ["reset"]:
                st.reset(body.get("types"), body.get("capacity"))
                return self._send(200, {"ok": True})
            if parts == ["capacity"]:
                st.capacity[f"{body['type']}/{body['region']}"] = int(body["count"])
                return self._send(200, {"ok": True})
            if parts == ["faults", "clear"]:
                st.faults.clear()
                return self._send(200, {"ok": True})
            if parts == ["faults"]:
                fault = {"target": "*", "count": 1, **body}
                if fault["kind"] == "malformed":
                    if fault["target"] not in WRONG_TYPES or fault.get("variant") not in malformed.VARIANTS:
                        return self._send(
                            400,
                            {
                                "error": f"a malformed fault needs a target of "
                                f"{', '.join(WRONG_TYPES)} and a variant of "
                                f"{', '.join(malformed.VARIANTS)}"
                            },
                        )
                elif fault["kind"] not in ERRORS:
                    return self._send(400, {"error": f"unknown fault {fault['kind']}"})
                st.faults.append(fault)
                return self._send(200, {"ok": True})
            if parts == ["config"]:
                for key in ("latency", "boot_seconds", "terminate_seconds", "launch_interval", "retry_after", "quota"):
                    if key in body:
                        setattr(st, key, body[key])
                return self._send(200, {"ok": True})
            if parts == ["foreign"]:
                made = []
                for _ in range(int(body.get("count", 1))):
                    iid = st.make_instance(
                        body.get("type", "gpu_1x_a10"),
                        body.get("region", "us-east-1"),
                        body.get("name", "my-notebook"),
                        "someone-elses-key",
                        body.get("tags", []),
                        {},
                    )
                    st.instances[iid]["status"] = "active"
                    made.append(iid)
                return self._send(200, {"ids": made})
            if parts == ["instances"]:
                for inst in st.instances.values():
                    st.advance(inst)
                rows = [{**st.row(i), "launch_body": i["_body"]} for i in st.instances.values()]
                return self._send(200, {"instances": rows})
            if parts == ["calls"]:
                return self._send(200, {"calls": dict(st.calls), "total": sum(st.calls.values())})
        return self._send(404, {"error": f"no control route {'/'.join(parts)}"})


class LambdaServer(BackgroundServer):
    """The fake on a background thread: ``url`` once started; ``state`` for in-process tests."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", latency: float = 0.0):
        super().__init__(Handler, State(), port, host)
        self.state.latency = latency


def main() -> None:
    serve_main(LambdaServer, what="Lambda Cloud API", port=8791, key=API_KEY)


if __name__ == "__main__":
    main()
