"""The Lambda Cloud API client: the kit's JSON client with Lambda's rules, and its few calls.

``LambdaApi(url, key)`` talks to ``$SPOTFLEET_LAMBDA_URL`` or ``https://cloud.lambda.ai`` (paths
under ``/api/v1``) over httpx (``providers.kit.http.JsonClient``); Lambda publishes no official
Python SDK. The key comes from ``$LAMBDA_API_KEY`` or the ``api_key = ...`` line of
``~/.lambda_cloud/lambda_keys`` (the file SkyPilot's Lambda support reads). It travels only in
the ``Authorization: Bearer`` header (the reference's recommended form) and is never part of a
message, a log line or ``repr``. Contract:

* retries follow ``providers.lambda_cloud.errors.RULES``: a 429 (Lambda limits most calls to
  about one a second) after its ``Retry-After`` or a jittered delay; a throttled *launch* after
  the reference's launch interval (one launch per 12 seconds: ``launch_interval``), and from then
  on this client's launches are paced by it. Launches of one client are sent one at a time. 5xx
  and connection failures are retried for reads only: a launch that failed that way may have
  started instances, so it is raised and the launch token decides on the next attempt;
* every failure becomes a class of ``providers.lambda_cloud.errors.TABLE``; a 2xx whose body is
  not JSON, or does not fit its schema (``providers.lambda_cloud.schemas``), is
  MalformedResponseError (``providers.kit.responses``), never an empty answer.
  ``calls`` counts HTTP requests (the benchmark reports it).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fleet.errors import AuthError, InstanceNotFoundError, ProviderError, RateLimitedError
from fleet.safetext import register_secret
from providers.kit.http import JsonClient
from providers.lambda_cloud import schemas
from providers.lambda_cloud.errors import PROVIDER, RULES, to_error

DEFAULT_URL = "https://cloud.lambda.ai"
URL_ENV = "SPOTFLEET_LAMBDA_URL"
KEY_ENV = "LAMBDA_API_KEY"
KEY_FILE = Path("~/.lambda_cloud/lambda_keys")
#: The reference's launch limit: one launch call per 12 seconds.
LAUNCH_INTERVAL = 12.0
#: Seconds slept before each retry (full jitter below each value) when no Retry-After is given.
RETRY_DELAYS = RULES.delays or ()
FIX_KEY = f"set ${KEY_ENV} (or write `api_key = <key>` to {KEY_FILE}); keys: https://cloud.lambda.ai/api-keys"
_LAUNCH = "launch "


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


def _no_key() -> AuthError:
    return AuthError(PROVIDER, f"no API key: {FIX_KEY}", code="no-api-key")


class LambdaApi(JsonClient):
    """One HTTP client for one Lambda account."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        launch_interval: float = LAUNCH_INTERVAL,
        sleep: Callable[[float], None] = time.sleep,
    ):
        key = api_key if api_key is not None else find_api_key()
        register_secret(key)  # the bare key too: an answer may echo it without "Bearer "
        super().__init__(
            PROVIDER,
            url or default_url(),
            rules=RULES.with_delays(tuple(retry_delays)),
            to_error=self._error,
            auth_headers={"Authorization": f"Bearer {key}"} if key else {},
            missing_auth=_no_key,
            timeout=timeout,
            sleep=sleep,
        )
        self.launch_interval = launch_interval
        self._sleep = sleep
        self._launch_lock = threading.Lock()
        self._paced = False  # set once a launch was throttled
        self._last_launch = 0.0

    def __repr__(self) -> str:
        return f"LambdaApi({self.url!r}, key={'set' if self.has_auth else 'none'})"

    @property
    def has_key(self) -> bool:
        return self.has_auth

    def _error(self, status: int, body: Any, what: str, retry_after: float | None) -> ProviderError:
        err = to_error(status, body, what, retry_after=retry_after)
        if isinstance(err, RateLimitedError) and what.startswith(_LAUNCH):
            self._paced = True
            if err.retry_after is None:
                err.retry_after = self.launch_interval
        return err

    # ---- the calls the adapter makes ------------------------------------------------------------
    def instance_types(self) -> dict[str, schemas.TypeItem]:
        """``GET /instance-types``: every type with its price and the regions with capacity now."""
        return self.request(
            "GET", "/api/v1/instance-types", what="list instance types", idempotent=True, schema=schemas.InstanceTypes
        ).data

    def instances(self) -> list[schemas.Instance]:
        """``GET /instances``: every instance of the account (Lambda has no server-side filter)."""
        return self.request(
            "GET", "/api/v1/instances", what="list instances", idempotent=True, schema=schemas.Instances
        ).data

    def launch(self, body: dict[str, Any], *, region: str = "") -> list[str]:
        """``POST /instance-operations/launch``: the ids of the instances started (all or none).
        A missing type or SSH key is a ProviderError (not InstanceNotFoundError)."""
        what = f"{_LAUNCH}{body.get('quantity', 1)} x {body.get('instance_type_name')}"
        with self._launch_lock:
            if self._paced:
                self._sleep(max(0.0, self._last_launch + self.launch_interval - time.monotonic()))
            try:
                return self.request(
                    "POST", "/api/v1/instance-operations/launch", body=body, what=what, schema=schemas.LaunchAnswer
                ).data.instance_ids
            except InstanceNotFoundError as err:
                raise ProviderError(PROVIDER, err.message, region=region, code=err.code) from None
            finally:
                self._last_launch = time.monotonic()

    def terminate(self, ids: Sequence[str]) -> list[schemas.Instance]:
        """``POST /instance-operations/terminate``; InstanceNotFoundError when any id is not the
        account's (the call then terminates none of them)."""
        return self.request(
            "POST",
            "/api/v1/instance-operations/terminate",
            body={"instance_ids": list(ids)},
            what=f"terminate {len(ids)} instance(s)",
            schema=schemas.TerminateAnswer,
        ).data.terminated_instances

    def ssh_keys(self) -> list[schemas.SSHKey]:
        return self.request(
            "GET", "/api/v1/ssh-keys", what="list SSH keys", idempotent=True, schema=schemas.SSHKeys
        ).data

    def add_ssh_key(self, name: str, public_key: str) -> schemas.SSHKey:
        return self.request(
            "POST",
            "/api/v1/ssh-keys",
            body={"name": name, "public_key": public_key},
            what=f"add SSH key {name}",
            schema=schemas.SSHKeyAnswer,
        ).data

    def delete_ssh_key(self, key_id: str) -> None:
        self.request("DELETE", f"/api/v1/ssh-keys/{key_id}", what="delete SSH key", idempotent=True)
