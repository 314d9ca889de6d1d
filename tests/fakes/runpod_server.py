"""A local fake of the RunPod REST API v2, written from RunPod's published v2 reference.

Sources (RunPod docs, REST API v2, beta; OpenAPI 3.1 ``api-reference-v2/openapi.json`` of
github.com/runpod/docs, read 2026-08-20):

- https://docs.runpod.io/api-reference-v2/overview and .../migrate-from-v1 (base
  ``https://api.runpod.io``, ``Authorization: Bearer <key>``, list answers wrapped as
  ``{"pods": [...]}``, errors as RFC 9457 ``{"title", "status", "detail", "errors"?}``; REST v1
  ``rest.runpod.io/v1`` retired on 2026-11-15);
- https://docs.runpod.io/api-reference-v2/pods/create-a-pod (``POST /v2/pods``: ``name`` and
  ``image`` required, exactly one of ``gpu: {id, count}`` or ``cpu``, ``cloud`` SECURE (default) or
  COMMUNITY, ``dataCenterIds``, ``env``, ``args``, ``disk``, ``ports``; ``201`` with the pod in
  ``PROVISIONING``, then ``STARTING``, then ``RUNNING``; ``422`` contract violation with
  ``errors``, ``400`` rule violation *or no capacity* (no machine-readable code, only ``detail``),
  ``402`` insufficient balance, ``403`` no access to the pool, ``429`` with ``Retry-After``
  integer seconds, ``5xx`` transient);
- .../pods/list-pods, .../get-a-pod, .../terminate-a-pod (``DELETE /v2/pods/{id}``: ``204``, ``404``
  when gone), .../trigger-a-pod-state-transition (``POST /v2/pods/{id}/action`` with ``{"action":
  "start"|"stop"|"restart"|"terminate"}``, ``409`` when not valid for the status);
- .../catalog/list-gpu-types (``GET /v2/catalog/gpus``: per-GPU ``price.secure``/``price.community``
  per GPU-hour, ``maxCount``; with ``include=AVAILABILITY&product=POD`` (and ``cloud``, ``count``)
  an ``availability`` level NONE|LOW|MEDIUM|HIGH and ``dataCenters``; ``product`` without
  ``include`` or the reverse is ``400``) and .../catalog/list-data-centers.

The v2 reference has no interruptible (spot) pods: no bid field on create, no spot price in the
catalog (GraphQL ``podRentInterruptable`` "is being removed from the runpod api", runpodctl
PR #267, April 2026). The fake sells on-demand pods only, as the API does.

Runs on its own (``python -m tests.fakes.runpod_server --port 8791``) or in a test
(``RunPodServer(port=0).start()``). Every answer carries ``RateLimit``/``RateLimit-Policy``.

Control API for tests (no auth): ``POST /_control/reset``; ``POST /_control/stock`` (``{"gpu": id,
"dataCenter": dc, "cloud": "SECURE", "free": n}``: pods that one (GPU, data center, cloud) can
still place, counted in pods); ``POST /_control/faults`` (``{"target": "create"|"list"|"catalog"|
"*", "kind": "throttle"|"server-error"|"auth"|"balance"|"forbidden"|"capacity"|"hostile",
"count": n}``, or the malformed 200: ``{"target": "list"|"catalog", "kind": "malformed",
"variant": "truncated"|"html"|"empty"|"wrong-types"}`` (``tests/fakes/malformed.py``; wrong types:
a mapping where the ``pods``/``gpus`` list belongs); ``POST /_control/faults/clear``;
``POST /_control/lose`` (``{"ids": [...], "status": "EXITED"|"ERROR"}``: the host went away, no
notice, as RunPod gives none); ``POST /_control/reprice`` (``{"ids": [...], "rate": r}``: those pods
now bill ``r`` USD/h, their ``cost``, as when a host's price changed under a running pod);
``POST /_control/foreign`` (pods spotfleet did not make);
``POST /_control/config`` (``boot_seconds``, ``retry_after``, ``latency``); ``GET
/_control/pods`` (all, terminated too, with their create bodies); ``GET /_control/calls``.
"""

from __future__ import annotations

import threading
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

try:
    import malformed
    from serving import BackgroundServer, JsonHandler, serve_main
except ImportError:  # imported as tests.fakes.runpod_server
    from . import malformed
    from .serving import BackgroundServer, JsonHandler, serve_main

API_KEY = "fake-runpod-key"
CLOUDS = ("SECURE", "COMMUNITY")
LEVELS = ((0, "NONE"), (2, "LOW"), (5, "MEDIUM"))  # free pods below the bound -> level; else HIGH

#: GPU types (ids as RunPod names them), per-GPU list prices per cloud, largest pod per cloud.
SEED_GPUS: list[dict[str, Any]] = [
    {
        "id": "NVIDIA H100 80GB HBM3",
        "name": "H100 SXM",
        "memory": 80,
        "price": {"secure": 2.99, "community": 2.69},
        "maxCount": {"secure": 8, "community": 8},
    },
    {
        "id": "NVIDIA H100 PCIe",
        "name": "H100 PCIe",
        "memory": 80,
        "price": {"secure": 2.39, "community": 1.99},
        "maxCount": {"secure": 8, "community": 4},
    },
    {
        "id": "NVIDIA H200",
        "name": "H200 SXM",
        "memory": 141,
        "price": {"secure": 3.99, "community": 3.59},
        "maxCount": {"secure": 8, "community": 0},
    },
    {
        "id": "NVIDIA A100-SXM4-80GB",
        "name": "A100 SXM",
        "memory": 80,
        "price": {"secure": 1.89, "community": 1.39},
        "maxCount": {"secure": 8, "community": 8},
    },
    {
        "id": "NVIDIA GeForce RTX 4090",
        "name": "RTX 4090",
        "memory": 24,
        "price": {"secure": 0.69, "community": 0.34},
        "maxCount": {"secure": 8, "community": 4},
    },
]
#: Data centers: id -> continental region (DataCenterRegion).
SEED_DATACENTERS = {
    "US-KS-2": "NORTH_AMERICA",
    "US-TX-3": "NORTH_AMERICA",
    "CA-MTL-1": "NORTH_AMERICA",
    "EU-RO-1": "EUROPE",
    "EUR-IS-1": "EUROPE",
}
DEFAULT_FREE = 6  # pods each (GPU, data center, cloud) can place unless told otherwise

FAULTS = {
    "throttle": (429, "Too Many Requests", "rate limit exceeded for window 10s; retry after the indicated delay"),
    "server-error": (502, "Bad Gateway", "upstream unavailable"),
    "auth": (401, "Unauthorized", "invalid or expired API key"),
    "balance": (402, "Payment Required", "insufficient balance to deploy this pod"),
    "forbidden": (403, "Forbidden", "access denied"),
    "capacity": (
        400,
        "Bad Request",
        "There are no instances available with the requested specifications. Please try again later.",
    ),
    # a hostile or careless gateway: it echoes the request's Authorization header, sets the terminal
    # title, clears the screen and forges a line of spotfleet's own output
    "hostile": (
        400,
        "Bad Request",
        "rejected request with Authorization: {authorization} (key {key})"
        "\x1b]0;pwned\x07\x1b[2J\r\nfake line: fleet is up",
    ),
}
WRONG_TYPES = {
    "list": b'{"pods": {"id": "abc123", "name": "spotfleet"}}',
    "catalog": b'{"gpus": {"id": "NVIDIA H200", "price": "cheap"}}',
}


def _level(free: int) -> str:
    for bound, name in LEVELS:
        if free <= bound:
            return name
    return "HIGH"


class State:
    """Everything the fake knows; every method runs under ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.latency = 0.0
        self.boot_seconds = 0.0
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.gpus = {
                g["id"]: {
                    **g,
                    "manufacturer": "AMD" if "AMD" in g["id"] else "NVIDIA",
                    "pool": None,
                    "secure": g["maxCount"]["secure"] > 0,
                    "community": g["maxCount"]["community"] > 0,
                }
                for g in SEED_GPUS
            }
            self.datacenters = dict(SEED_DATACENTERS)
            self.free: dict[tuple[str, str, str], int] = {}
            self.pods: dict[str, dict[str, Any]] = {}
            self.faults: list[dict[str, Any]] = []
            self.calls: dict[str, int] = {}
            self.next_id = 1
            self.retry_after = 1

    def stock(self, gpu: str, dc: str, cloud: str) -> int:
        if self.gpus[gpu]["maxCount"][cloud.lower()] == 0:
            return 0
        used = sum(
            1
            for p in self.pods.values()
            if not p["_gone"]
            and p["gpu"]["id"] == gpu
            and p["dataCenterId"] == dc
            and p["cloud"] == cloud
            and p["status"] != "EXITED"
        )
        return max(0, self.free.get((gpu, dc, cloud), DEFAULT_FREE) - used)

    def take_fault(self, targets: tuple[str, ...]) -> dict[str, Any] | None:
        for fault in self.faults:
            if fault["count"] > 0 and fault["target"] in targets:
                fault["count"] -= 1
                return fault
        return None

    def view(self, pod: dict[str, Any]) -> dict[str, Any]:
        """The Pod object as the API answers it (boots PROVISIONING -> STARTING -> RUNNING)."""
        age = time.time() - pod["_created"]
        if pod["status"] in ("PROVISIONING", "STARTING"):
            if age >= self.boot_seconds:
                pod["status"] = "RUNNING"
                pod["startedAt"] = pod["startedAt"] or _iso(time.time())
            elif age >= self.boot_seconds / 2:
                pod["status"] = "STARTING"
        running = pod["status"] == "RUNNING"
        row = {k: v for k, v in pod.items() if not k.startswith("_")}
        row["actions"] = {"RUNNING": ["stop", "restart", "terminate"], "EXITED": ["start", "terminate"]}.get(
            pod["status"], ["terminate"]
        )
        row["cost"] = pod["_rate"] if pod["status"] not in ("EXITED", "TERMINATED") else 0.0
        row["runtime"] = (
            {
                "uptime": int(age),
                "ports": [
                    {
                        "private": 22,
                        "public": 30000 + pod["_n"],
                        "type": "tcp",
                        "ip": f"203.0.113.{pod['_n'] % 250 + 1}",
                    }
                ],
            }
            if running
            else None
        )
        return row


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Handler(JsonHandler):
    server_version = "fake-runpod/2"
    WRONG_TYPES = WRONG_TYPES
    state: State

    def _headers(self) -> dict[str, str]:
        return {"RateLimit": '"user";r=99;t=10', "RateLimit-Policy": '"user";q=100;w=10'}

    def _problem(
        self,
        status: int,
        title: str,
        detail: str,
        errors: list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        body: dict[str, Any] = {"title": title, "status": status, "detail": detail}
        if errors:
            body["errors"] = errors
        self._send(status, body, headers, ctype="application/problem+json")

    def _fault(self, fault: dict[str, Any]) -> None:
        status, title, detail = FAULTS[fault["kind"]]
        if fault["kind"] == "hostile":
            auth = self.headers.get("Authorization") or ""
            detail = detail.format(authorization=auth, key=auth.removeprefix("Bearer "))
        headers = {"Retry-After": str(int(fault.get("retry_after", self.state.retry_after)))} if status == 429 else None
        self._problem(status, title, detail, headers=headers)

    def _authed(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {API_KEY}":
            return True
        self._problem(401, "Unauthorized", "missing or invalid bearer token")
        return False

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self._body() if method in ("POST", "PATCH", "PUT") else {}
        if parts[:1] == ["_control"]:
            return self._control(method, parts[1:], body if isinstance(body, dict) else {})
        with self.state.lock:
            named = [("{id}" if i == 2 and parts[:2] == ["v2", "pods"] else p) for i, p in enumerate(parts)]
            route = f"{method} /{'/'.join(named)}"
            self.state.calls[route] = self.state.calls.get(route, 0) + 1
            latency = self.state.latency
        if latency:
            time.sleep(latency)
        with self.state.lock:
            if not self._authed():
                return None
            fault = self.state.take_fault(("*",))
            if fault is not None and fault["kind"] != "malformed":
                return self._fault(fault)
            if body is None:
                return self._problem(400, "Bad Request", "request body is not valid JSON")
            if parts == ["v2", "catalog", "gpus"] and method == "GET":
                return self._catalog(query)
            if parts == ["v2", "catalog", "datacenters"] and method == "GET":
                return self._send(
                    200,
                    {
                        "dataCenters": [
                            {
                                "id": dc,
                                "name": dc,
                                "region": region,
                                "globalNetwork": False,
                                "networkVolumeTypes": [],
                                "compliance": [],
                            }
                            for dc, region in sorted(self.state.datacenters.items())
                        ]
                    },
                )
            if parts == ["v2", "pods"] and method == "GET":
                return self._list()
            if parts == ["v2", "pods"] and method == "POST":
                return self._create(body)
            if len(parts) == 3 and parts[:2] == ["v2", "pods"]:
                if method == "GET":
                    return self._get(parts[2])
                if method == "DELETE":
                    return self._terminate(parts[2])
            if len(parts) == 4 and parts[:2] == ["v2", "pods"] and parts[3] == "action" and method == "POST":
                return self._action(parts[2], body)
            return self._problem(404, "Not Found", f"no route {method} {url.path}")

    # ---- the API ----------------------------------------------------------------------------
    def _catalog(self, query: dict[str, str]) -> None:
        st = self.state
        fault = st.take_fault(("catalog",))
        if fault is not None and fault["kind"] != "malformed":
            return self._fault(fault)
        include, product = query.get("include"), query.get("product")
        if bool(include) != bool(product):
            return self._problem(
                400, "Bad Request", "product is required with include=AVAILABILITY, and valid only with it"
            )
        cloud = query.get("cloud", "SECURE")
        if cloud not in CLOUDS:
            return self._problem(
                422, "Unprocessable Entity", "validation failed", [f"cloud: must be one of {', '.join(CLOUDS)}"]
            )
        try:
            count = int(query.get("count", "1"))
        except ValueError:
            return self._problem(422, "Unprocessable Entity", "validation failed", ["count: must be an integer"])
        rows = []
        for gpu in st.gpus.values():
            row = {k: v for k, v in gpu.items()}
            if include:
                dcs = (
                    []
                    if count > gpu["maxCount"][cloud.lower()]
                    else [
                        {"id": dc, "name": dc, "availability": _level(st.stock(gpu["id"], dc, cloud))}
                        for dc in sorted(st.datacenters)
                    ]
                )
                dcs = [d for d in dcs if d["availability"] != "NONE"]
                row["availability"] = max(
                    (d["availability"] for d in dcs), key=["NONE", "LOW", "MEDIUM", "HIGH"].index, default="NONE"
                )
                if dcs:
                    row["dataCenters"] = dcs
            rows.append(row)
        self._send(200, {"gpus": rows}, broken=fault)

    def _list(self) -> None:
        fault = self.state.take_fault(("list",))
        if fault is not None and fault["kind"] != "malformed":
            return self._fault(fault)
        pods = [self.state.view(p) for p in self.state.pods.values() if not p["_gone"]]
        self._send(200, {"pods": pods}, broken=fault)

    def _get(self, pod_id: str) -> None:
        pod = self.state.pods.get(pod_id)
        if pod is None or pod["_gone"]:
            return self._problem(404, "Not Found", "The requested Pod does not exist.")
        self._send(200, self.state.view(pod))

    def _create(self, body: dict[str, Any]) -> None:
        st = self.state
        fault = st.take_fault(("create",))
        if fault is not None:
            return self._fault(fault)
        errors = []
        if not isinstance(body.get("name"), str) or not body.get("name"):
            errors.append("name: is required")
        if not isinstance(body.get("image"), str) or not body.get("image"):
            errors.append("image: is required unless templateId is set")
        if ("gpu" in body) == ("cpu" in body):
            errors.append("exactly one of gpu or cpu must be set")
        gpu = body.get("gpu") if isinstance(body.get("gpu"), dict) else {}
        if "gpu" in body and not isinstance(gpu.get("id"), str):
            errors.append("gpu.id: is required")
        count = gpu.get("count", 1)
        if not isinstance(count, int) or count < 1:
            errors.append("gpu.count: must be an integer >= 1")
        cloud = body.get("cloud", "SECURE")
        if cloud not in CLOUDS:
            errors.append(f"cloud: must be one of {', '.join(CLOUDS)}")
        env = body.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            errors.append("env: must map names to strings")
        unknown = sorted(
            set(body)
            - {
                "name",
                "image",
                "gpu",
                "cpu",
                "cloud",
                "dataCenterIds",
                "env",
                "args",
                "disk",
                "ports",
                "registry",
                "mounts",
                "globalNetworking",
                "startSsh",
                "startJupyter",
                "templateId",
            }
        )
        errors += [f"{k}: unknown property" for k in unknown]
        if errors:
            return self._problem(422, "Unprocessable Entity", "validation failed", errors)
        if "cpu" in body:
            return self._problem(400, "Bad Request", "this fake places GPU pods only")
        info = st.gpus.get(gpu["id"])
        if info is None:
            return self._problem(400, "Bad Request", f"GPU type {gpu['id']} is not a valid GPU type id")
        if count > info["maxCount"][cloud.lower()]:
            return self._problem(
                400,
                "Bad Request",
                f"{count} x {gpu['id']} exceeds the largest {cloud} pod ({info['maxCount'][cloud.lower()]})",
            )
        wanted = body.get("dataCenterIds") or sorted(st.datacenters)
        bad = [dc for dc in wanted if dc not in st.datacenters]
        if bad:
            return self._problem(400, "Bad Request", f"unknown data center {bad[0]}")
        placed = next((dc for dc in wanted if st.stock(gpu["id"], dc, cloud) > 0), None)
        if placed is None:
            return self._fault({"kind": "capacity"})
        pod_id = f"rp{st.next_id:08d}"
        st.next_id += 1
        now = time.time()
        rate = round(float(info["price"][cloud.lower()]) * count, 6)
        st.pods[pod_id] = {
            "id": pod_id,
            "name": body["name"],
            "image": body["image"],
            "args": body.get("args", ""),
            "disk": body.get("disk", 20),
            "ports": body.get("ports", []),
            "env": dict(env),
            "registry": None,
            "status": "PROVISIONING",
            "mounts": body.get("mounts", {}),
            "gpu": {"id": gpu["id"], "count": count},
            "cloud": cloud,
            "dataCenterId": placed,
            "cudaVersion": "12.8",
            "ssh": {
                "proxy": {
                    "host": "ssh.runpod.io",
                    "port": 22,
                    "username": f"{pod_id}-64411eb2",
                    "command": f"ssh {pod_id}-64411eb2@ssh.runpod.io",
                },
                "direct": None,
            },
            "template": None,
            "locked": False,
            "globalNetworking": {"enabled": False},
            "createdAt": _iso(now),
            "startedAt": None,
            "_created": now,
            "_rate": rate,
            "_gone": False,
            "_body": body,
            "_n": st.next_id,
        }
        self._send(201, st.view(st.pods[pod_id]))

    def _terminate(self, pod_id: str) -> None:
        pod = self.state.pods.get(pod_id)
        if pod is None or pod["_gone"]:
            return self._problem(404, "Not Found", "The requested Pod does not exist.")
        pod["_gone"] = True
        pod["status"] = "TERMINATED"
        self._send(204)

    def _action(self, pod_id: str, body: dict[str, Any]) -> None:
        pod = self.state.pods.get(pod_id)
        action = body.get("action")
        if action not in ("start", "stop", "restart", "terminate") or set(body) != {"action"}:
            return self._problem(
                422,
                "Unprocessable Entity",
                "validation failed",
                ["action: must be one of start, stop, restart, terminate"],
            )
        if pod is None or pod["_gone"]:
            return self._problem(404, "Not Found", "The requested Pod does not exist.")
        if action == "terminate":
            return self._terminate(pod_id)
        if action not in self.state.view(pod)["actions"]:
            return self._problem(409, "Conflict", f"cannot {action} a pod that is {pod['status']}")
        pod["status"] = "EXITED" if action == "stop" else "RUNNING"
        self._send(200, self.state.view(pod))

    # ---- control ----------------------------------------------------------------------------
    def _control(self, method: str, parts: list[str], body: dict[str, Any]) -> None:
        st = self.state
        with st.lock:
            if parts == ["reset"]:
                st.reset()
                return self._send(200, {"ok": True})
            if parts == ["stock"]:
                st.free[(body["gpu"], body["dataCenter"], body.get("cloud", "SECURE"))] = int(body["free"])
                return self._send(200, {"ok": True})
            if parts == ["faults", "clear"]:
                st.faults.clear()
                return self._send(200, {"ok": True})
            if parts == ["faults"]:
                fault = {"target": "*", "count": 1, **body}
                if fault["kind"] == "malformed":
                    if fault["target"] not in WRONG_TYPES or fault.get("variant") not in malformed.VARIANTS:
                        return self._problem(
                            400,
                            "Bad Request",
                            "a malformed fault needs target list|catalog and a "
                            f"variant of {', '.join(malformed.VARIANTS)}",
                        )
                elif fault["kind"] not in FAULTS:
                    return self._problem(400, "Bad Request", f"unknown fault {fault['kind']}")
                st.faults.append(fault)
                return self._send(200, {"ok": True})
            if parts == ["lose"]:
                for pod_id in body.get("ids", []):
                    st.pods[pod_id]["status"] = body.get("status", "EXITED")
                return self._send(200, {"ok": True})
            if parts == ["reprice"]:
                for pod_id in body.get("ids", []):
                    st.pods[pod_id]["_rate"] = float(body["rate"])
                return self._send(200, {"ok": True})
            if parts == ["foreign"]:
                made = []
                for _ in range(int(body.get("count", 1))):
                    pod_id = f"rp{st.next_id:08d}"
                    st.next_id += 1
                    st.pods[pod_id] = {
                        "id": pod_id,
                        "name": body.get("name", "my-notebook"),
                        "image": "runpod/pytorch",
                        "args": "",
                        "disk": 20,
                        "ports": [],
                        "env": {},
                        "registry": None,
                        "status": "RUNNING",
                        "mounts": {},
                        "gpu": {"id": body.get("gpu", "NVIDIA GeForce RTX 4090"), "count": 1},
                        "cloud": "COMMUNITY",
                        "dataCenterId": "US-KS-2",
                        "cudaVersion": "12.8",
                        "ssh": {"proxy": None, "direct": None},
                        "template": None,
                        "locked": False,
                        "globalNetworking": {"enabled": False},
                        "createdAt": _iso(time.time()),
                        "startedAt": _iso(time.time()),
                        "_created": time.time(),
                        "_rate": 0.34,
                        "_gone": False,
                        "_body": {},
                        "_n": st.next_id,
                    }
                    made.append(pod_id)
                return self._send(200, {"ids": made})
            if parts == ["config"]:
                for key in ("latency", "boot_seconds", "retry_after"):
                    if key in body:
                        setattr(st, key, body[key])
                return self._send(200, {"ok": True})
            if parts == ["pods"]:
                rows = [{**st.view(p), "terminated": p["_gone"], "create_body": p["_body"]} for p in st.pods.values()]
                return self._send(200, {"pods": rows})
            if parts == ["calls"]:
                return self._send(200, {"calls": dict(st.calls), "total": sum(st.calls.values())})
        return self._problem(404, "Not Found", f"no control route {'/'.join(parts)}")


class RunPodServer(BackgroundServer):
    """The fake on a background thread: ``url`` once started; ``state`` for in-process tests."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", latency: float = 0.0):
        super().__init__(Handler, State(), port, host)
        self.state.latency = latency


def main() -> None:
    serve_main(RunPodServer, what="RunPod API v2", port=8791, key=API_KEY)


if __name__ == "__main__":
    main()
