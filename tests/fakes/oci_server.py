"""A local fake of the OCI Core Services and Identity REST APIs (version 20160918), written from
Oracle's public API reference, for tests and benchmarks driven by the real ``oci`` SDK.

Runs on its own (``python -m tests.fakes.oci_server --port 8795``) or in a test
(``OciServer(port=0).start()``); point the SDK clients' ``service_endpoint`` at ``url``. Sources:

- LaunchInstance, ListInstances, GetInstance, TerminateInstance, ListShapes:
  https://docs.oracle.com/iaas/api/#/en/iaas/20160918/Instance/ and .../Shape/ListShapes
- ListAvailabilityDomains (Identity): https://docs.oracle.com/iaas/api/#/en/identity/20160918/AvailabilityDomain/
- errors: https://docs.oracle.com/iaas/Content/API/References/apierrors.htm (``{"code", "message"}``
  bodies, an ``opc-request-id`` header on every answer; 429 ``TooManyRequests`` without a
  ``Retry-After``); a launch with no host free answers 500 ``InternalError`` "Out of host capacity."
  (as OCI does; see e.g. oracle/karpenter-provider-oci#36)
- preemptible capacity: https://docs.oracle.com/iaas/Content/Compute/Concepts/preemptible.htm
  (``preemptibleInstanceConfig.preemptionAction`` ``{"type": "TERMINATE", "preserveBootVolume"}``;
  bare metal shapes do not take it; a reclaimed instance is terminated, with no notice to it)
- request signing: https://docs.oracle.com/iaas/Content/API/Concepts/signingrequests.htm (the
  ``Authorization: Signature version="1",keyId="<tenancy>/<user>/<fingerprint>",...`` header; a
  request without one, or for another key, is 401 ``NotAuthenticated``).

Routes (all under ``/20160918``): ``GET availabilityDomains?compartmentId=``; ``GET shapes?
compartmentId=&availabilityDomain=&limit=&page=``; ``POST instances`` (an ``opc-retry-token``
header replays its first answer for the same body, 409 ``IncorrectState`` for another body);
``GET instances?compartmentId=&lifecycleState=&availabilityDomain=&limit=&page=`` (pages through the
``opc-next-page`` header; terminated instances stay listed as ``TERMINATED`` for a while, as on
OCI); ``GET instances/{id}``; ``DELETE instances/{id}?preserveBootVolume=`` (204; 404
``NotAuthorizedOrNotFound`` for an unknown id). Instances go ``PROVISIONING`` -> ``RUNNING``
after ``boot_seconds`` and ``TERMINATING`` -> ``TERMINATED`` after ``stop_seconds``.

Refusals: unknown shape, availability domain, subnet or image (400 ``InvalidParameter``), a
missing required field (400 ``MissingParameter``), preemptible capacity on a bare metal shape
(400 ``InvalidParameter``), a shape's service limit (400 ``LimitExceeded``), no host free in the
AD (500 ``InternalError`` "Out of host capacity.").

Control API (no auth) under ``/_control/``: ``reset``; ``capacity`` ``{"ad", "shape", "hosts"}``
(the most live instances of the shape the AD holds; unset: unlimited); ``limits`` ``{"shape", "limit"}`` (live instances of the shape per
tenancy); ``faults`` ``{"target": "launch"|"list"|"shapes"|"*", "kind": "throttle"|"server-error"|
"auth"|"capacity"|"limit"|"quota"|"hostile", "count": n}`` (``hostile`` answers 400 with a message echoing
the request's ``Authorization`` header, terminal escapes and a forged line); the "malformed 200"
fault ``{"target": "list"|"shapes", "kind": "malformed", "variant": ..., "count": n}`` answers
200 with a broken body (``tests/fakes/malformed.py``; wrong types: an object where the list
belongs); ``faults/clear``; ``preempt`` ``{"ids"}`` (reclaim preemptible instances: terminated);
``foreign`` ``{"shape", "ad", "count", "freeformTags"?}`` (instances spotfleet did not make);
``config`` (``latency``, ``boot_seconds``, ``stop_seconds``); ``GET instances`` (all, with their
launch bodies) and ``GET calls`` (API calls per route).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

try:
    import malformed
    from serving import BackgroundServer, JsonHandler
except ImportError:  # imported as tests.fakes.oci_server
    from . import malformed
    from .serving import BackgroundServer, JsonHandler

TENANCY = "ocid1.tenancy.oc1..aaaaaaaafaketenancy"
USER = "ocid1.user.oc1..aaaaaaaafakeuser"
COMPARTMENT = "ocid1.compartment.oc1..aaaaaaaafakecompartment"
REGION = "us-ashburn-1"
SUBNET = "ocid1.subnet.oc1.iad.aaaaaaaafakesubnet"
IMAGE = "ocid1.image.oc1.iad.aaaaaaaafakegpuimage"
ADS = ("Uocm:US-ASHBURN-AD-1", "Uocm:US-ASHBURN-AD-2", "Uocm:US-ASHBURN-AD-3")

#: The GPU shapes served (a subset of OCI's, with their published sizes).
SHAPES: dict[str, dict[str, Any]] = {
    "VM.GPU.A10.1": {"gpus": 1, "gpuDescription": "NVIDIA A10", "ocpus": 15.0, "memoryInGBs": 240.0},
    "VM.GPU.A10.2": {"gpus": 2, "gpuDescription": "NVIDIA A10", "ocpus": 30.0, "memoryInGBs": 480.0},
    "BM.GPU.A10.4": {"gpus": 4, "gpuDescription": "NVIDIA A10", "ocpus": 64.0, "memoryInGBs": 1024.0},
    "BM.GPU4.8": {"gpus": 8, "gpuDescription": "NVIDIA A100 40GB", "ocpus": 64.0, "memoryInGBs": 2048.0},
    "BM.GPU.A100-v2.8": {"gpus": 8, "gpuDescription": "NVIDIA A100 80GB", "ocpus": 128.0, "memoryInGBs": 2048.0},
    "BM.GPU.L40S.4": {"gpus": 4, "gpuDescription": "NVIDIA L40S", "ocpus": 112.0, "memoryInGBs": 1024.0},
    "BM.GPU.H100.8": {"gpus": 8, "gpuDescription": "NVIDIA H100 80GB", "ocpus": 112.0, "memoryInGBs": 2048.0},
    "VM.Standard.E4.Flex": {"gpus": 0, "gpuDescription": None, "ocpus": 1.0, "memoryInGBs": 16.0},
}

FAULTS = {
    "throttle": (429, "TooManyRequests", "Too many requests for the user"),
    "server-error": (500, "InternalServerError", "Internal server error"),
    "auth": (
        401,
        "NotAuthenticated",
        "The required information to complete authentication was not provided or was incorrect.",
    ),
    "capacity": (500, "InternalError", "Out of host capacity."),
    "limit": (
        400,
        "LimitExceeded",
        "The following service limits were exceeded: gpu-count. Request a service "
        "limit increase from the service limits page in the console.",
    ),
    "quota": (400, "QuotaExceeded", "The following compartment quotas were exceeded: gpu-count."),
    "hostile": (
        400,
        "InvalidParameter",
        "rejected request with Authorization: {authorization}\x1b]0;pwned\x07\x1b[2J\r\nfake line: fleet is up",
    ),
}

#: The "wrong-types" malformed body per target: an object where the answer's list belongs.
WRONG_TYPES = {
    "list": b'{"id": "ocid1.instance.oc1..x", "lifecycleState": 7, "freeformTags": "spotfleet"}',
    "shapes": b'{"shape": "BM.GPU.H100.8", "gpus": "eight"}',
}

#: Metadata is at most 32,000 bytes in all (LaunchInstanceDetails.metadata in the API reference).
METADATA_LIMIT = 32_000
#: Freeform tag keys: no spaces or periods (https://docs.oracle.com/iaas/Content/Tagging/Concepts/taggingoverview.htm).
TAG_KEY = re.compile(r"^[^\s.]{1,100}$")
LIVE = ("PROVISIONING", "STARTING", "RUNNING", "STOPPING", "STOPPED", "MOVING", "CREATING_IMAGE")
_KEY_ID = re.compile(r'keyId="([^"]+)"')


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class State:
    """Everything the fake knows; every method runs under ``lock``."""

    def __init__(self, fingerprint: str = "") -> None:
        self.lock = threading.RLock()
        self.fingerprint = fingerprint  # "" accepts any key of the fake's tenancy and user
        self.latency = 0.0
        self.boot_seconds = 0.0
        self.stop_seconds = 0.0
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.instances: dict[str, dict[str, Any]] = {}
            self.order: list[str] = []
            self.tokens: dict[str, tuple[str, str]] = {}  # retry token -> (body digest, instance id)
            self.capacity: dict[tuple[str, str], int] = {}  # (ad, shape) -> most live instances it holds
            self.limits: dict[str, int] = {}  # shape -> live instances allowed
            self.faults: list[dict[str, Any]] = []
            self.calls: dict[str, int] = {}

    def take_fault(self, targets: tuple[str, ...]) -> dict[str, Any] | None:
        for fault in self.faults:
            if fault["count"] > 0 and fault["target"] in targets:
                fault["count"] -= 1
                return fault
        return None

    def advance(self, inst: dict[str, Any]) -> dict[str, Any]:
        """Move ``inst`` along its lifecycle by the clock; the public view of it."""
        now = time.time()
        if inst["lifecycleState"] == "PROVISIONING" and now - inst["_created"] >= self.boot_seconds:
            inst["lifecycleState"] = "RUNNING"
        if inst["lifecycleState"] == "TERMINATING" and now - inst["_ended"] >= self.stop_seconds:
            inst["lifecycleState"] = "TERMINATED"
        return {k: v for k, v in inst.items() if not k.startswith("_")}

    def live(self, shape: str, ad: str = "") -> int:
        return sum(
            1
            for i in self.instances.values()
            if i["shape"] == shape and i["lifecycleState"] in LIVE and (not ad or i["availabilityDomain"] == ad)
        )

    def new_instance(self, body: dict[str, Any], *, foreign: bool = False) -> dict[str, Any]:
        iid = f"ocid1.instance.oc1.iad.{uuid.uuid4().hex}"
        now = time.time()
        shape = SHAPES[body["shape"]]
        inst = {
            "id": iid,
            "compartmentId": body.get("compartmentId", COMPARTMENT),
            "availabilityDomain": body["availabilityDomain"],
            "faultDomain": "FAULT-DOMAIN-1",
            "displayName": body.get("displayName") or f"instance-{iid[-8:]}",
            "region": "iad",
            "shape": body["shape"],
            "lifecycleState": "RUNNING" if foreign else "PROVISIONING",
            "timeCreated": rfc3339(now),
            "freeformTags": dict(body.get("freeformTags") or {}),
            "definedTags": {},
            "metadata": dict(body.get("metadata") or {}),
            "imageId": (body.get("sourceDetails") or {}).get("imageId"),
            "sourceDetails": body.get("sourceDetails") or {"sourceType": "image", "imageId": IMAGE},
            "preemptibleInstanceConfig": body.get("preemptibleInstanceConfig"),
            "launchMode": "NATIVE",
            "shapeConfig": {
                "ocpus": shape["ocpus"],
                "memoryInGBs": shape["memoryInGBs"],
                "gpus": shape["gpus"],
                "gpuDescription": shape["gpuDescription"],
            },
            "_created": now,
            "_ended": None,
            "_body": body,
            "_preempted": False,
        }
        self.instances[iid] = inst
        self.order.append(iid)
        return inst


class Handler(JsonHandler):
    server_version = "fake-oci/1"
    WRONG_TYPES = WRONG_TYPES
    state: State

    def _headers(self) -> dict[str, str]:
        return {"opc-request-id": uuid.uuid4().hex.upper()}

    def _error(self, status: int, code: str, message: str) -> None:
        self._send(status, {"code": code, "message": message})

    def _fault(self, fault: dict[str, Any]) -> None:
        status, code, message = FAULTS[fault["kind"]]
        if fault["kind"] == "hostile":
            message = message.format(authorization=self.headers.get("Authorization") or "")
        self._error(status, code, message)

    def _authed(self) -> bool:
        """A signed request of the fake tenancy's user (the signature itself is not verified)."""
        auth = self.headers.get("Authorization") or ""
        found = _KEY_ID.search(auth)
        want = f"{TENANCY}/{USER}/"
        ok = (
            auth.startswith("Signature ")
            and 'version="1"' in auth
            and "signature=" in auth
            and found is not None
            and found.group(1).startswith(want)
            and (not self.state.fingerprint or found.group(1) == want + self.state.fingerprint)
        )
        if not ok:
            self._error(
                401,
                "NotAuthenticated",
                "The required information to complete authentication was not provided or was incorrect.",
            )
        return ok

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        raw = self._raw_body()
        parts = [p for p in url.path.split("/") if p]
        if parts[:1] == ["_control"]:
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                return self._error(400, "CannotParseRequest", "body is not JSON")
            return self._control(method, parts[1:], body)
        route = f"{method} /{'/'.join('{id}' if p.startswith('ocid1.') else p for p in parts)}"
        with self.state.lock:
            self.state.calls[route] = self.state.calls.get(route, 0) + 1
            latency = self.state.latency
        if latency:
            time.sleep(latency)
        if not self._authed():
            return None
        with self.state.lock:
            fault = self.state.take_fault(("*",))
            if fault is not None:
                return self._fault(fault)
            try:
                return self._api(method, parts, query, raw)
            except ApiError as err:
                return self._error(err.status, err.code, err.message)

    def _api(self, method: str, parts: list[str], query: dict[str, str], raw: bytes) -> None:
        if parts[:1] != ["20160918"]:
            raise ApiError(404, "NotFound", f"no operation at {'/'.join(parts)}")
        rest = parts[1:]
        if method == "GET" and rest == ["availabilityDomains"]:
            self._compartment(query)
            return self._send(
                200,
                [
                    {"name": ad, "id": f"ocid1.availabilitydomain.oc1..{i}", "compartmentId": TENANCY}
                    for i, ad in enumerate(ADS)
                ],
            )
        if method == "GET" and rest == ["shapes"]:
            return self._shapes(query)
        if method == "POST" and rest == ["instances"]:
            return self._launch(raw)
        if method == "GET" and rest == ["instances"]:
            return self._list(query)
        if len(rest) == 2 and rest[0] == "instances":
            inst = self.state.instances.get(rest[1])
            if inst is None:
                raise ApiError(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
            if method == "GET":
                return self._send(200, self.state.advance(inst), {"etag": inst["id"][-12:]})
            if method == "DELETE":
                if inst["lifecycleState"] in LIVE:
                    inst["lifecycleState"], inst["_ended"] = "TERMINATING", time.time()
                return self._send(204)
        raise ApiError(404, "NotFound", f"there is no operation {method} /{'/'.join(parts)}")

    # ---- the API ----------------------------------------------------------------------------
    @staticmethod
    def _compartment(query: dict[str, str]) -> str:
        if not query.get("compartmentId"):
            raise ApiError(400, "MissingParameter", "compartmentId is required")
        if query["compartmentId"] not in (COMPARTMENT, TENANCY):
            raise ApiError(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
        return query["compartmentId"]

    def _page(self, rows: list[dict[str, Any]], query: dict[str, str], broken: dict[str, Any] | None) -> None:
        try:
            start = int(query.get("page") or 0)
            limit = max(1, min(1000, int(query.get("limit") or 100)))
        except ValueError:
            raise ApiError(400, "InvalidParameter", "page and limit must be numbers") from None
        page = rows[start : start + limit]
        headers = {"opc-next-page": str(start + limit)} if start + limit < len(rows) else {}
        self._send(200, page, headers, broken=broken)

    def _shapes(self, query: dict[str, str]) -> None:
        self._compartment(query)
        fault = self.state.take_fault(("shapes",))
        if fault is not None and fault["kind"] != "malformed":
            return self._fault(fault)
        ad = query.get("availabilityDomain")
        if ad and ad not in ADS:
            raise ApiError(400, "InvalidParameter", f"availabilityDomain {ad} is not valid")
        rows = [
            {
                "shape": name,
                "processorDescription": "fake",
                "networkingBandwidthInGbps": 50.0,
                "isLiveMigrationSupported": name.startswith("VM."),
                "billingType": "PAID",
                "quotaNames": [f"{name.lower()}-count"],
                **shape,
            }
            for name, shape in SHAPES.items()
        ]
        self._page(rows, query, fault if fault is not None else None)

    def _launch(self, raw: bytes) -> None:
        st = self.state
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ApiError(
                400, "CannotParseRequest", "Incorrectly formatted request. Please refer to the documentation."
            )
        token = self.headers.get("opc-retry-token")
        digest = hashlib.sha256(raw).hexdigest()
        if token:
            if len(token) > 64:
                raise ApiError(400, "InvalidParameter", "opc-retry-token must be at most 64 characters")
            seen = st.tokens.get(token)
            if seen is not None:
                if seen[0] != digest:
                    raise ApiError(
                        409,
                        "IncorrectState",
                        "The retry token was used in an earlier request with different parameters.",
                    )
                return self._send(200, st.advance(st.instances[seen[1]]))
        fault = st.take_fault(("launch",))
        if fault is not None:
            return self._fault(fault)
        for field in ("availabilityDomain", "compartmentId", "shape"):
            if not body.get(field):
                raise ApiError(400, "MissingParameter", f"{field} is required")
        if body["compartmentId"] != COMPARTMENT:
            raise ApiError(404, "NotAuthorizedOrNotFound", "Authorization failed or requested resource not found.")
        if body["availabilityDomain"] not in ADS:
            raise ApiError(400, "InvalidParameter", f"Invalid availabilityDomain {body['availabilityDomain']}")
        if body["shape"] not in SHAPES:
            raise ApiError(400, "InvalidParameter", f"Shape {body['shape']} is not valid")
        subnet = (body.get("createVnicDetails") or {}).get("subnetId") or body.get("subnetId")
        if not subnet:
            raise ApiError(400, "MissingParameter", "createVnicDetails.subnetId is required")
        if subnet != SUBNET:
            raise ApiError(400, "RelatedResourceNotAuthorizedOrNotFound", f"subnet {subnet} not found")
        source = body.get("sourceDetails") or {}
        if source.get("sourceType") != "image" or not source.get("imageId"):
            raise ApiError(400, "MissingParameter", "sourceDetails with sourceType image and an imageId is required")
        if source["imageId"] != IMAGE:
            raise ApiError(400, "RelatedResourceNotAuthorizedOrNotFound", f"image {source['imageId']} not found")
        pre = body.get("preemptibleInstanceConfig")
        if pre is not None:
            action = pre.get("preemptionAction") if isinstance(pre, dict) else None
            if not isinstance(action, dict) or action.get("type") != "TERMINATE":
                raise ApiError(
                    400, "InvalidParameter", "preemptibleInstanceConfig.preemptionAction.type must be TERMINATE"
                )
            if body["shape"].startswith("BM."):
                raise ApiError(
                    400, "InvalidParameter", f"Preemptible capacity is not supported for shape {body['shape']}"
                )
        meta = body.get("metadata") or {}
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise ApiError(400, "InvalidParameter", "metadata values must be strings")
        if sum(len(k) + len(v) for k, v in meta.items()) > METADATA_LIMIT:
            raise ApiError(400, "InvalidParameter", f"metadata exceeds the {METADATA_LIMIT}-byte limit")
        tags = body.get("freeformTags") or {}
        for key, value in tags.items() if isinstance(tags, dict) else [(None, None)]:
            if not isinstance(key, str) or not TAG_KEY.match(key) or not isinstance(value, str) or len(value) > 256:
                raise ApiError(
                    400,
                    "InvalidParameter",
                    f"freeform tag {key!r}: keys are 1-100 characters without "
                    "spaces or periods, values strings of at most 256",
                )
        limit = st.limits.get(body["shape"])
        if limit is not None and st.live(body["shape"]) + 1 > limit:
            raise ApiError(
                400,
                "LimitExceeded",
                f"The following service limits were exceeded: "
                f"{body['shape'].lower()}-count. Request a service limit increase from the service "
                "limits page in the console.",
            )
        cap = st.capacity.get((body["availabilityDomain"], body["shape"]))
        if cap is not None and st.live(body["shape"], body["availabilityDomain"]) >= cap:
            raise ApiError(500, "InternalError", "Out of host capacity.")
        inst = st.new_instance(body)
        if token:
            st.tokens[token] = (digest, inst["id"])
        self._send(200, st.advance(inst), {"etag": inst["id"][-12:]})

    def _list(self, query: dict[str, str]) -> None:
        compartment = self._compartment(query)
        fault = self.state.take_fault(("list",))
        if fault is not None and fault["kind"] != "malformed":
            return self._fault(fault)
        rows = [self.state.advance(self.state.instances[i]) for i in self.state.order]
        rows = [r for r in rows if r["compartmentId"] == compartment]
        if query.get("lifecycleState"):
            rows = [r for r in rows if r["lifecycleState"] == query["lifecycleState"].upper()]
        if query.get("availabilityDomain"):
            rows = [r for r in rows if r["availabilityDomain"] == query["availabilityDomain"]]
        self._page(rows, query, fault)

    # ---- control ----------------------------------------------------------------------------
    def _control(self, method: str, parts: list[str], body: Any) -> None:
        st = self.state
        with st.lock:
            if parts == ["reset"]:
                st.reset()
                return self._send(200, {"ok": True})
            if parts == ["capacity"]:
                st.capacity[(body["ad"], body["shape"])] = int(body["hosts"])
                return self._send(200, {"ok": True})
            if parts == ["limits"]:
                st.limits[body["shape"]] = int(body["limit"])
                return self._send(200, {"ok": True})
            if parts == ["faults", "clear"]:
                st.faults.clear()
                return self._send(200, {"ok": True})
            if parts == ["faults"]:
                fault = {"target": "*", "count": 1, **body}
                if fault["kind"] == "malformed":
                    if fault["target"] not in WRONG_TYPES or fault.get("variant") not in malformed.VARIANTS:
                        return self._error(
                            400,
                            "InvalidParameter",
                            "a malformed fault needs target list|shapes and "
                            f"a variant of {', '.join(malformed.VARIANTS)}",
                        )
                elif fault["kind"] not in FAULTS:
                    return self._error(400, "InvalidParameter", f"unknown fault {fault['kind']}")
                st.faults.append(fault)
                return self._send(200, {"ok": True})
            if parts == ["preempt"]:
                for iid in body.get("ids", []):
                    inst = st.instances[iid]
                    if inst["preemptibleInstanceConfig"] is None:
                        return self._error(400, "InvalidParameter", f"{iid} is not preemptible")
                    inst.update(lifecycleState="TERMINATED", _ended=time.time(), _preempted=True)
                return self._send(200, {"ok": True})
            if parts == ["foreign"]:
                made = []
                for _ in range(int(body.get("count", 1))):
                    inst = st.new_instance(
                        {
                            "shape": body.get("shape", "VM.GPU.A10.1"),
                            "availabilityDomain": body.get("ad", ADS[0]),
                            "displayName": body.get("displayName", "my-notebook"),
                            "freeformTags": body.get("freeformTags", {}),
                        },
                        foreign=True,
                    )
                    made.append(inst["id"])
                return self._send(200, {"ids": made})
            if parts == ["config"]:
                for key in ("latency", "boot_seconds", "stop_seconds"):
                    if key in body:
                        setattr(st, key, float(body[key]))
                return self._send(200, {"ok": True})
            if parts == ["instances"]:
                rows = [
                    {**st.advance(i), "preempted": i["_preempted"], "launch_body": i["_body"]}
                    for i in st.instances.values()
                ]
                return self._send(200, {"instances": rows})
            if parts == ["calls"]:
                return self._send(200, {"calls": dict(st.calls), "total": sum(st.calls.values())})
        return self._error(404, "NotFound", f"no control route {'/'.join(parts)}")


class OciServer(BackgroundServer):
    """The fake on a background thread: ``url`` once started; ``state`` for in-process tests."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", latency: float = 0.0, fingerprint: str = ""):
        super().__init__(Handler, State(fingerprint), port, host)
        self.state.latency = latency

    def write_config(self, folder: Path, profile: str = "DEFAULT") -> dict[str, str]:
        """An OCI SDK config file for the fake's tenancy and user, with a throwaway RSA API key, in
        ``folder``; the environment that points spotfleet (and the SDK's endpoint) at this fake."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        folder.mkdir(parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        digest = hashlib.md5(der).hexdigest()  # noqa: S324 (OCI's key fingerprint is an MD5 of the public key)
        fingerprint = ":".join(digest[i : i + 2] for i in range(0, 32, 2))
        (folder / "oci_api_key.pem").write_bytes(pem)
        (folder / "oci_api_key.pem").chmod(0o600)
        config = folder / "config"
        config.write_text(
            f"[{profile}]\nuser={USER}\nfingerprint={fingerprint}\ntenancy={TENANCY}\n"
            f"region={REGION}\nkey_file={folder / 'oci_api_key.pem'}\n"
        )
        config.chmod(0o600)
        return {"SPOTFLEET_OCI_CONFIG": str(config), "SPOTFLEET_OCI_ENDPOINT": self.url}


def main() -> None:
    parser = argparse.ArgumentParser(description="A fake OCI Core Services / Identity API for tests and benchmarks.")
    parser.add_argument("--port", type=int, default=8795)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every API answer")
    args = parser.parse_args()
    server = OciServer(args.port, args.host, args.latency)
    print(
        f"fake OCI API on {server.url} (tenancy {TENANCY}, compartment {COMPARTMENT}, subnet {SUBNET}, "
        f"image {IMAGE}); control API under /_control/",
        flush=True,
    )
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
