"""The Lambda Cloud API client: base URL, Bearer key, JSON, retries on 429 and failed reads.

``LambdaApi(url, key)`` talks to ``$SPOTFLEET_LAMBDA_URL`` or ``https://cloud.lambda.ai`` (paths
under ``/api/v1``) over httpx; Lambda publishes no official Python SDK. The key comes from
``$LAMBDA_API_KEY`` or the ``api_key = ...`` line of ``~/.lambda_cloud/lambda_keys`` (the file
SkyPilot's Lambda support reads). It travels only in the ``Authorization: Bearer`` header
(the reference's recommended form) and is never part of a message, a log line or ``repr``.
Contract:

* a 429 (Lambda limits most calls to about one a second, launches to one per 12 seconds) is
  retried after its ``Retry-After`` (capped) or the next of ``retry_delays``; when they are
  spent, RateLimitedError. A 429 refuses before doing anything, so a launch is retried too,
  after ``launch_interval``; launches of one client are sent one at a time, and once one was
  throttled, each waits ``launch_interval`` after the one before;
* 5xx and connection failures are retried only for reads (``idempotent=True``); a launch that
  failed that way may have started instances, so it is raised (TransientProviderError) and the
  caller's launch token decides on the next attempt;
* every failure becomes a class of ``providers.lambda_cloud.errors``; a 2xx whose body is not
  JSON, or does not fit its schema (``providers.lambda_cloud.schemas``), is
  MalformedResponseError (``providers.kit.responses``), never an empty answer.
  ``calls`` counts HTTP requests (the benchmark reports it).
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TypeVar

from pydantic import BaseModel

from fleet.errors import AuthError, InstanceNotFoundError, ProviderError, RateLimitedError, TransientProviderError
from fleet.safetext import register_secret
from providers.kit.responses import check, parse_json
from providers.lambda_cloud import schemas
from providers.lambda_cloud.errors import PROVIDER, to_error

if TYPE_CHECKING:
    import httpx

DEFAULT_URL = "https://cloud.lambda.ai"
URL_ENV = "SPOTFLEET_LAMBDA_URL"
KEY_ENV = "LAMBDA_API_KEY"
KEY_FILE = Path("~/.lambda_cloud/lambda_keys")
#: The reference's launch limit: one launch call per 12 seconds.
LAUNCH_INTERVAL = 12.0
#: Seconds slept before each retry (full jitter below each value) when no Retry-After is given.
RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0, 12.0)
FIX_KEY = f"set ${KEY_ENV} (or write `api_key = <key>` to {KEY_FILE}); keys: https://cloud.lambda.ai/api-keys"
M = TypeVar("M", bound=BaseModel)


def default_url(environ: Mapping[str, str] = os.environ) -> str:
    return environ.get(URL_ENV) or DEFAULT_URL


def find_api_key(environ: Mapping[str, str] = os.environ, home: Path | None = None) -> str:
    """The API key from ``$LAMBDA_API_KEY`` or ``~/.lambda_cloud/lambda_keys`` ("" if none)."""
    key = environ.get(KEY_ENV, "").strip()
    if key:
        return key
    path = (home / ".lambda_cloud" / "lambda_keys") if home else KEY_FILE.expanduser()
    if path.is_file():
        for line in path.read_text().splitlines():
            name, sep, value = line.partition("=")
            if sep and name.strip() == "api_key":
                return value.strip()
    return ""


class LambdaApi:
    """One HTTP client for one account (thread-safe: httpx.Client is)."""

    def __init__(self, url: str | None = None, api_key: str | None = None, *, timeout: float = 30.0,
                 retry_delays: Sequence[float] = RETRY_DELAYS, max_retry_after: float = 30.0,
                 launch_interval: float = LAUNCH_INTERVAL):
        import httpx       # here, not at import: registering the adapter needs no client

        self.url = (url or default_url()).rstrip("/")
        self._key = api_key if api_key is not None else find_api_key()
        register_secret(self._key)        # masked in any provider text that echoes it (fleet.safetext)
        self.retry_delays = tuple(retry_delays)
        self.max_retry_after = max_retry_after
        self._client = httpx.Client(base_url=self.url, timeout=timeout,
                                    headers={"Accept": "application/json", "User-Agent": "spotfleet"})
        self._lock = threading.Lock()
        self.calls = 0
        self.launch_interval = launch_interval
        self._launch_lock = threading.Lock()
        self._paced = False                 # set once a launch was throttled
        self._last_launch = 0.0

    def __repr__(self) -> str:
        return f"LambdaApi({self.url!r}, key={'set' if self._key else 'none'})"

    @property
    def has_key(self) -> bool:
        return bool(self._key)

    def close(self) -> None:
        self._client.close()

    # ---- the calls the adapter makes ------------------------------------------------------------
    def instance_types(self) -> dict[str, schemas.TypeItem]:
        """``GET /instance-types``: every type with its price and the regions with capacity now."""
        return self.request("GET", "/api/v1/instance-types", what="list instance types", idempotent=True,
                            schema=schemas.InstanceTypes).data

    def instances(self) -> list[schemas.Instance]:
        """``GET /instances``: every instance of the account (Lambda has no server-side filter)."""
        return self.request("GET", "/api/v1/instances", what="list instances", idempotent=True,
                            schema=schemas.Instances).data

    def launch(self, body: dict[str, Any], *, region: str = "") -> list[str]:
        """``POST /instance-operations/launch``: the ids of the instances started (all or none).
        A missing type or SSH key is a ProviderError (not InstanceNotFoundError)."""
        what = f"launch {body.get('quantity', 1)} x {body.get('instance_type_name')}"
        with self._launch_lock:
            if self._paced:
                time.sleep(max(0.0, self._last_launch + self.launch_interval - time.monotonic()))
            try:
                return self.request("POST", "/api/v1/instance-operations/launch", body=body, what=what, region=region,
                                    not_found=ProviderError, schema=schemas.LaunchAnswer,
                                    pause=self.launch_interval).data.instance_ids
            finally:
                self._last_launch = time.monotonic()

    def terminate(self, ids: Sequence[str]) -> list[schemas.Instance]:
        """``POST /instance-operations/terminate``; InstanceNotFoundError when any id is not the
        account's (the call then terminates none of them)."""
        return self.request("POST", "/api/v1/instance-operations/terminate", body={"instance_ids": list(ids)},
                            what=f"terminate {len(ids)} instance(s)",
                            schema=schemas.TerminateAnswer).data.terminated_instances

    def ssh_keys(self) -> list[schemas.SSHKey]:
        return self.request("GET", "/api/v1/ssh-keys", what="list SSH keys", idempotent=True,
                            schema=schemas.SSHKeys).data

    def add_ssh_key(self, name: str, public_key: str) -> schemas.SSHKey:
        return self.request("POST", "/api/v1/ssh-keys", body={"name": name, "public_key": public_key},
                            what=f"add SSH key {name}", schema=schemas.SSHKeyAnswer).data

    def delete_ssh_key(self, key_id: str) -> None:
        self.request("DELETE", f"/api/v1/ssh-keys/{key_id}", what="delete SSH key", idempotent=True)

    # ---- the transport --------------------------------------------------------------------------
    def request(self, method: str, path: str, *, what: str, body: Any = None, idempotent: bool = False,
                region: str = "", not_found: type[ProviderError] = InstanceNotFoundError,
                schema: type[M] | None = None, pause: float | None = None) -> Any:
        """Send one call (with the retries above) and return its JSON body, read as ``schema``
        when one is given. ``what`` names the operation in errors; ``pause`` is the wait after a 429
        that names none (a launch: the launch interval). Raises ProviderError subclasses."""
        import httpx

        if not self._key:
            raise AuthError(PROVIDER, f"no API key: {FIX_KEY}", code="no-api-key")
        headers = {"Authorization": f"Bearer {self._key}"}
        for attempt in range(len(self.retry_delays) + 1):
            last = attempt == len(self.retry_delays)
            with self._lock:
                self.calls += 1
            try:
                resp = self._client.request(method, path, headers=headers, json=body)
            except httpx.HTTPError as err:
                if idempotent and not last:
                    self._sleep(attempt, None)
                    continue
                raise TransientProviderError(PROVIDER, f"{what}: {type(err).__name__} talking to {self.url}",
                                             region=region, code="connection") from None
            if resp.status_code < 400:
                data = parse_json(resp.content, provider=PROVIDER, what=what)
                return data if schema is None else check(schema, data, provider=PROVIDER, what=what,
                                                         body=resp.content, region=region)
            error = to_error(resp.status_code, _error_body(resp), what, region=region, not_found=not_found)
            retry = isinstance(error, RateLimitedError) or (isinstance(error, TransientProviderError) and idempotent)
            if not retry or last:
                raise error
            if pause is not None and isinstance(error, RateLimitedError):
                self._paced = True
                time.sleep(_seconds(resp.headers.get("Retry-After"), self.max_retry_after) or pause)
                continue
            self._sleep(attempt, resp.headers.get("Retry-After"))
        raise AssertionError("unreachable")

    def _sleep(self, attempt: int, retry_after: str | None) -> None:
        wait = _seconds(retry_after, self.max_retry_after)
        time.sleep(wait if wait is not None else random.uniform(0, self.retry_delays[attempt]))


def _seconds(retry_after: str | None, cap: float) -> float | None:
    """A ``Retry-After`` in seconds (capped), None when absent or not a number."""
    try:
        return min(max(0.0, float(retry_after)), cap) if retry_after is not None else None
    except ValueError:
        return None


def _error_body(resp: httpx.Response) -> Any:
    """A failure's JSON body, or its text as the message (a gateway's HTML 502 names no code)."""
    if not resp.content:
        return {}
    try:
        return resp.json()
    except ValueError:
        return {"message": resp.text[:200]}
