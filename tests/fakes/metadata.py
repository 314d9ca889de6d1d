"""Fake instance-metadata services and the Vast instance endpoint, speaking the documented formats.

Each fake is a threaded stdlib HTTP server on 127.0.0.1 with a control API for tests:
publish a notice (``published_at`` records when it became visible, for latency figures),
inject failures (``fail_next(n, status)`` answers 5xx; ``stall_next(n, seconds)`` holds the
answer longer than a client's timeout), and inspect ``requests`` (method, path, headers, body).

- :class:`FakeImds`   AWS IMDSv2: token PUT with TTL header, 401 without/expired token,
  ``spot/instance-action`` (404 / JSON) and ``events/recommendations/rebalance``.
- :class:`FakeGce`    GCE metadata: ``Metadata-Flavor: Google`` required (403), ``ETag``,
  ``wait_for_change`` with ``last_etag`` and ``timeout_sec`` blocking until the value changes.
- :class:`FakeAzure`  Azure IMDS Scheduled Events: ``Metadata: true`` required (400),
  ``api-version`` required, events document, ``StartRequests`` acknowledgements; managed-identity
  tokens (``/metadata/identity/oauth2/token``: ``resource`` required, ``client_id`` picks one of the
  VM's user-assigned identities, which must be named when there are several) as JWTs an emulator
  that checks issuer, audience and lifetime accepts (Azurite's ``--oauth basic``).
- :class:`FakeVast`   ``GET /api/v0/instances/{id}/?owner=me`` with Bearer auth; outbid/stop/destroy.
- :class:`FakeOciImds` OCI instance metadata v2 (``/opc/v2/instance/...``; ``Authorization: Bearer
  Oracle`` required, 401 without, https://docs.oracle.com/iaas/Content/Compute/Tasks/gettingmetadata.htm).
  It has no preemption notice to publish: OCI gives none.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import format_datetime
from hashlib import sha1
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Answer = tuple[int, dict[str, str], bytes]


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


class FakeServer:
    """Base: serve ``handle()`` on a free port in a daemon thread, with fault injection."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self.requests: list[Seen] = []
        self._faults: list[tuple[str, float]] = []
        self.published_at: float | None = None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                url = urlsplit(self.path)
                seen = Seen(
                    self.command,
                    url.path,
                    {k: v[-1] for k, v in parse_qs(url.query).items()},
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                status, headers, data = fake._dispatch(seen)
                try:
                    self.send_response(status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (a stalled answer)

            do_GET = do_PUT = do_POST = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # lifecycle -------------------------------------------------------------------------------
    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._faults.clear()
            self.published_at = None
            self._reset()
            self._lock.notify_all()

    # fault injection ---------------------------------------------------------------------------
    def fail_next(self, count: int = 1, status: int = 500) -> None:
        """The next ``count`` requests get ``status`` (e.g. 500, 503) and an empty body."""
        with self._lock:
            self._faults.extend([("fail", float(status))] * count)

    def stall_next(self, count: int = 1, seconds: float = 1.0) -> None:
        """The next ``count`` requests are answered only after ``seconds`` (client timeouts)."""
        with self._lock:
            self._faults.extend([("stall", seconds)] * count)

    def _dispatch(self, seen: Seen) -> Answer:
        with self._lock:
            self.requests.append(seen)
            fault = self._faults.pop(0) if self._faults else None
        if fault and fault[0] == "fail":
            return int(fault[1]), {}, b""
        if fault and fault[0] == "stall":
            time.sleep(fault[1])
        return self.handle(seen)

    def _publish(self) -> None:
        """Mark that the notice is visible from now on (call with the lock held)."""
        self.published_at = time.time()
        self._lock.notify_all()

    def seen(self, method: str, path_suffix: str) -> list[Seen]:
        with self._lock:
            return [r for r in self.requests if r.method == method and r.path.endswith(path_suffix)]

    # to implement ------------------------------------------------------------------------------
    def _reset(self) -> None:
        raise NotImplementedError

    def handle(self, seen: Seen) -> Answer:
        raise NotImplementedError


def _json(status: int, doc: Any, headers: dict[str, str] | None = None) -> Answer:
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(doc).encode()


def _text(status: int, text: str, headers: dict[str, str] | None = None) -> Answer:
    return status, {"Content-Type": "text/plain", **(headers or {})}, text.encode()


class FakeImds(FakeServer):
    """AWS instance metadata, IMDSv2 only (tokens required, as on hardened instances)."""

    MAX_TTL = 21600

    def _reset(self) -> None:
        self.tokens: dict[str, float] = {}
        self.instance_action: dict[str, str] | None = None
        self.rebalance: dict[str, str] | None = None
        self.instance_id = "i-0123456789abcdef0"

    def __init__(self) -> None:
        super().__init__()
        self._reset()

    def schedule_action(self, action: str = "terminate", in_seconds: float = 120.0) -> float:
        """Publish ``spot/instance-action``; returns the termination time (epoch s, whole seconds)."""
        when = int(time.time() + in_seconds)
        with self._lock:
            self.instance_action = {"action": action, "time": _iso(when)}
            self._publish()
        return float(when)

    def recommend_rebalance(self) -> None:
        with self._lock:
            self.rebalance = {"noticeTime": _iso(time.time())}
            self._publish()

    def expire_tokens(self) -> None:
        """Every token issued so far is refused from now on (401), as after its TTL."""
        with self._lock:
            self.tokens = {t: 0.0 for t in self.tokens}

    def handle(self, seen: Seen) -> Answer:
        if seen.path == "/latest/api/token":
            if seen.method != "PUT":
                return _text(405, "Method Not Allowed")
            try:
                ttl = int(seen.headers.get("x-aws-ec2-metadata-token-ttl-seconds", ""))
            except ValueError:
                return _text(400, "Bad Request")
            if not 1 <= ttl <= self.MAX_TTL:
                return _text(400, "Bad Request")
            token = uuid.uuid4().hex
            with self._lock:
                self.tokens[token] = time.time() + ttl
            return _text(200, token, {"X-aws-ec2-metadata-token-ttl-seconds": str(ttl)})
        if not seen.path.startswith("/latest/meta-data"):
            return _text(404, "Not Found")
        with self._lock:
            expiry = self.tokens.get(seen.headers.get("x-aws-ec2-metadata-token", ""), 0.0)
            if expiry <= time.time():
                return _text(401, "Unauthorized")
            doc = {
                "/latest/meta-data/spot/instance-action": self.instance_action,
                "/latest/meta-data/events/recommendations/rebalance": self.rebalance,
                "/latest/meta-data/instance-id": self.instance_id,
            }.get(seen.path)
        if doc is None:
            return _text(404, "Not Found")
        return _text(200, doc) if isinstance(doc, str) else _json(200, doc)


class FakeGce(FakeServer):
    """GCE metadata server: ``instance/preempted`` with ETags and ``wait_for_change``."""

    def _reset(self) -> None:
        self.preempted = False

    def __init__(self) -> None:
        super().__init__()
        self._reset()

    def preempt(self) -> None:
        with self._lock:
            self.preempted = True
            self._publish()

    def _value(self) -> tuple[str, str]:
        value = "TRUE" if self.preempted else "FALSE"
        return value, sha1(value.encode()).hexdigest()[:16]

    def handle(self, seen: Seen) -> Answer:
        flavor = {"Metadata-Flavor": "Google"}
        if seen.headers.get("metadata-flavor") != "Google" or "x-forwarded-for" in seen.headers:
            return _text(403, "Missing required header: Metadata-Flavor", flavor)
        if seen.path == "/computeMetadata/v1/instance/id":
            return _text(200, "4520031799277581759", flavor)
        # predefined keys (cloud.google.com/compute/docs/metadata/predefined-metadata-keys)
        if seen.path == "/computeMetadata/v1/instance/zone":
            return _text(200, "projects/123456789012/zones/us-central1-a", flavor)
        if seen.path == "/computeMetadata/v1/instance/name":
            return _text(200, "spotfleet-node-1", flavor)
        if seen.path != "/computeMetadata/v1/instance/preempted":
            return _text(404, "Not Found", flavor)
        if seen.query.get("wait_for_change") == "true":
            try:
                timeout = float(seen.query.get("timeout_sec", "300"))
            except ValueError:
                return _text(400, "Bad Request: timeout_sec", flavor)
            last = seen.query.get("last_etag")
            with self._lock:
                start_etag = last if last is not None else self._value()[1]
                self._lock.wait_for(lambda: self._value()[1] != start_etag, timeout=timeout)
        with self._lock:
            value, etag = self._value()
        return _text(200, value, {**flavor, "ETag": etag})


class FakeAzure(FakeServer):
    """Azure IMDS: instance name and Scheduled Events with StartRequests acknowledgements."""

    def _reset(self) -> None:
        self.vm_name = "spot-vm-1"
        self.incarnation = 1
        self.events: list[dict[str, Any]] = []
        self.acks: list[str] = []
        self.identities: dict[str, str] = {}  # client id -> principal (object) id
        self.tenant = "00000000-0000-0000-0000-0000000a11ce"
        self.token_seconds = 3600
        self.audience = ""  # tokens for another audience, when set

    def __init__(self) -> None:
        super().__init__()
        self._reset()

    def assign_identity(self, client_id: str, principal_id: str = "") -> None:
        """Give the VM a user-assigned identity (as attaching it to the VM does)."""
        with self._lock:
            self.identities[client_id] = principal_id or str(uuid.uuid4())

    def schedule(
        self, event_type: str = "Preempt", *, resources: list[str] | None = None, not_before_in: float = 30.0
    ) -> str:
        """Publish a Scheduled event; returns its EventId."""
        event_id = str(uuid.uuid4()).upper()
        when = datetime.fromtimestamp(int(time.time() + not_before_in), tz=timezone.utc)
        with self._lock:
            self.events.append(
                {
                    "EventId": event_id,
                    "EventType": event_type,
                    "ResourceType": "VirtualMachine",
                    "Resources": [self.vm_name] if resources is None else resources,
                    "EventStatus": "Scheduled",
                    "NotBefore": format_datetime(when, usegmt=True),
                    "Description": "",
                    "EventSource": "Platform",
                    "DurationInSeconds": -1,
                }
            )
            self.incarnation += 1
            self._publish()
        return event_id

    def handle(self, seen: Seen) -> Answer:
        if seen.headers.get("metadata") != "true":
            return _json(400, {"error": "Bad request. Required metadata header not specified"})
        if "api-version" not in seen.query:
            return _json(400, {"error": "Bad request. api-version was not specified in the request"})
        if seen.path == "/metadata/instance/compute/name" and seen.method == "GET":
            return _text(200, self.vm_name)
        if seen.path == "/metadata/identity/oauth2/token" and seen.method == "GET":
            with self._lock:
                return self._token(seen.query)
        if seen.path != "/metadata/scheduledevents":
            return _json(404, {"error": "Not found"})
        with self._lock:
            if seen.method == "POST":
                return self._start(seen.body)
            return _json(200, {"DocumentIncarnation": self.incarnation, "Events": self.events})

    def _token(self, query: dict[str, str]) -> Answer:
        """A managed-identity token, in IMDS's wire format (string numbers, ``expires_on`` epoch)."""
        resource = query.get("resource", "")
        if not resource:
            return _json(
                400, {"error": "invalid_request", "error_description": "Required query variable 'resource' is missing"}
            )
        client_id = query.get("client_id", "")
        if not self.identities or (client_id and client_id not in self.identities):
            return _json(400, {"error": "invalid_request", "error_description": "Identity not found"})
        if not client_id:
            if len(self.identities) > 1:
                return _json(
                    400,
                    {
                        "error": "invalid_request",
                        "error_description": "Multiple user assigned "
                        "identities exist, please specify the clientId / resourceId of the identity "
                        "in the token request",
                    },
                )
            client_id = next(iter(self.identities))
        now = int(time.time())
        claims = {
            "aud": self.audience or resource.rstrip("/"),
            "iss": f"https://sts.windows.net/{self.tenant}/",
            "iat": now - 5,
            "nbf": now - 5,
            "exp": now + self.token_seconds,
            "appid": client_id,
            "oid": self.identities[client_id],
            "sub": self.identities[client_id],
            "tid": self.tenant,
            "xms_mirid": f"/subscriptions/x/resourcegroups/x/providers/Microsoft.ManagedIdentity/"
            f"userAssignedIdentities/{client_id}",
        }
        token = ".".join(_b64url(json.dumps(part).encode()) for part in ({"typ": "JWT", "alg": "RS256"}, claims))
        return _json(
            200,
            {
                "access_token": f"{token}.{_b64url(uuid.uuid4().bytes)}",
                "client_id": client_id,
                "expires_in": str(self.token_seconds),
                "expires_on": str(now + self.token_seconds),
                "ext_expires_in": str(self.token_seconds),
                "not_before": str(now - 5),
                "resource": resource,
                "token_type": "Bearer",
            },
        )

    def _start(self, body: bytes) -> Answer:
        try:
            ids = [r["EventId"] for r in json.loads(body)["StartRequests"]]
        except (ValueError, KeyError, TypeError):
            return _json(400, {"error": "Bad request. StartRequests malformed"})
        for event in self.events:
            if event["EventId"] in ids:
                event["EventStatus"], event["NotBefore"] = "Started", ""
        self.acks.extend(ids)
        self.incarnation += 1
        return 200, {}, b""


class FakeVast(FakeServer):
    """Vast.ai ``show instance`` endpoint (``/api/v0/instances/{id}/?owner=me``)."""

    def _reset(self) -> None:
        self.api_key = "test-vast-key"
        self.instances: dict[str, dict[str, Any]] = {}

    def __init__(self) -> None:
        super().__init__()
        self._reset()

    def add_instance(self, instance_id: str, *, is_bid: bool = True) -> None:
        row = {
            "id": int(instance_id),
            "label": "spotfleet",
            "is_bid": is_bid,
            "min_bid": 0.9,
            "dph_total": 1.1,
            "actual_status": "running",
            "intended_status": "running",
            "cur_state": "running",
            "next_state": "running",
            "status_msg": "success, running",
            "start_date": time.time(),
        }
        with self._lock:
            self.instances[instance_id] = row

    def begin_stop(self, instance_id: str) -> None:
        """The platform decided to stop it (outbid), the container still runs."""
        with self._lock:
            self.instances[instance_id].update(intended_status="stopped", next_state="stopped")
            self._publish()

    def outbid(self, instance_id: str) -> None:
        """Outbid and stopped: cur_state == intended_status == next_state == "stopped"."""
        with self._lock:
            self.instances[instance_id].update(
                intended_status="stopped",
                next_state="stopped",
                cur_state="stopped",
                actual_status="exited",
                status_msg="outbid, stopped",
            )
            self._publish()

    def destroy(self, instance_id: str) -> None:
        with self._lock:
            self.instances.pop(instance_id, None)
            self._publish()

    def handle(self, seen: Seen) -> Answer:
        if seen.headers.get("authorization") != f"Bearer {self.api_key}":
            return _json(401, {"success": False, "error": "auth_error", "msg": "Invalid user key"})
        parts = seen.path.strip("/").split("/")
        if seen.method != "GET" or len(parts) != 4 or parts[:3] != ["api", "v0", "instances"]:
            return _json(404, {"success": False, "error": "not_found", "msg": "no such endpoint"})
        with self._lock:
            row = self.instances.get(parts[3])
            if row is None:
                return _json(
                    404, {"success": False, "error": "no_such_instance", "msg": f"Instance {parts[3]} not found."}
                )
            return _json(200, {"instances": dict(row)})


class FakeOciImds(FakeServer):
    """OCI instance metadata v2: the instance document and its fields; nothing announces preemption."""

    def _reset(self) -> None:
        self.instance = {
            "id": "ocid1.instance.oc1.iad.fakenode",
            "shape": "VM.GPU.A10.1",
            "availabilityDomain": "Uocm:US-ASHBURN-AD-1",
            "region": "iad",
        }

    def __init__(self) -> None:
        super().__init__()
        self._reset()

    def handle(self, seen: Seen) -> Answer:
        if seen.headers.get("authorization") != "Bearer Oracle":
            return _json(401, {"code": "NotAuthenticated", "message": "Authorization header is required"})
        parts = seen.path.strip("/").split("/")
        if seen.method != "GET" or parts[:3] != ["opc", "v2", "instance"] or len(parts) > 4:
            return _json(404, {"code": "NotFound", "message": "no such metadata path"})
        with self._lock:
            if len(parts) == 3:
                return _json(200, self.instance)
            if parts[3] not in self.instance:
                return _json(404, {"code": "NotFound", "message": "no such metadata field"})
            return _text(200, str(self.instance[parts[3]]))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
