"""The Vast.ai REST client: base URL, Bearer key, JSON, retries on 429 and failed reads.

``VastApi(url, key)`` talks to ``$SPOTFLEET_VAST_URL`` or ``https://console.vast.ai`` over
httpx (the official SDK pulls about 70 MB of unrelated packages), imported when a client is made.
Contract:

* a 429 ``rate_limit_exceeded`` is retried after its ``Retry-After`` (capped at
  ``max_retry_after``) or the next of ``retry_delays``; when they are spent, RateLimitedError.
  ``search_quota_exceeded`` is raised at once (it resets in minutes);
* 5xx and connection failures are retried only for reads (``idempotent=True``); a create that
  failed that way may have created something, so it is raised (TransientProviderError) and the
  caller's idempotency token decides on the next attempt;
* every failure becomes one of the classes in ``providers.vast.errors``; a 2xx whose body is not
  JSON, or does not fit the ``schema`` asked for (``providers.vast.schemas``), is
  MalformedResponseError (``providers.kit.responses``), never an empty answer;
* the key travels only in the ``Authorization`` header and is never part of a message, a
  log line or ``repr``. ``calls`` counts HTTP requests (the benchmark reports it).
"""

from __future__ import annotations

import json
import random
import threading
import time
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TypeVar

from pydantic import BaseModel

from fleet.agent.vast import default_url, find_api_key
from fleet.errors import AuthError, RateLimitedError, TransientProviderError
from fleet.safetext import register_secret
from providers.kit.responses import check, parse_json
from providers.vast.errors import to_error

if TYPE_CHECKING:
    import httpx

#: Seconds slept before each retry (full jitter below each value) when no Retry-After is given.
RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)
M = TypeVar("M", bound=BaseModel)


class VastApi:
    """One HTTP client for one account (thread-safe: httpx.Client is)."""

    def __init__(self, url: str | None = None, api_key: str | None = None, *, timeout: float = 30.0,
                 retry_delays: Sequence[float] = RETRY_DELAYS, max_retry_after: float = 30.0):
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

    def __repr__(self) -> str:
        return f"VastApi({self.url!r}, key={'set' if self._key else 'none'})"

    @property
    def has_key(self) -> bool:
        return bool(self._key)

    def close(self) -> None:
        self._client.close()

    def request(self, method: str, path: str, *, what: str, params: Mapping[str, Any] | None = None,
                body: Any = None, auth: bool = True, idempotent: bool = False,
                schema: type[M] | None = None) -> Any:
        """Send one call (with the retries above) and return its JSON body, read as ``schema``
        when one is given (an empty success body is ``{}`` without one).

        ``what`` names the operation in errors. ``params`` values that are not strings are
        JSON-encoded, as the official client does. Raises ProviderError subclasses.
        """
        import httpx

        if auth and not self._key:
            raise AuthError("vast", "no API key: set $VAST_API_KEY or write it to ~/.config/vastai/vast_api_key",
                            code="no-api-key")
        headers = {"Authorization": f"Bearer {self._key}"} if auth and self._key else {}
        query = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (params or {}).items()}
        for attempt in range(len(self.retry_delays) + 1):
            last = attempt == len(self.retry_delays)
            with self._lock:
                self.calls += 1
            try:
                resp = self._client.request(method, path, params=query or None, headers=headers,
                                            json=body if body is not None else None)
            except httpx.HTTPError as err:
                if idempotent and not last:
                    self._sleep(attempt, None)
                    continue
                raise TransientProviderError("vast", f"{what}: {type(err).__name__} talking to {self.url}",
                                             code="connection") from None
            if resp.status_code < 400:
                data = parse_json(resp.content, provider="vast", what=what) if resp.content else {}
                return data if schema is None else check(schema, data, provider="vast", what=what, body=resp.content)
            error = to_error(resp.status_code, _error_body(resp), what)
            retry = (isinstance(error, RateLimitedError) and error.code != "search_quota_exceeded") or \
                (isinstance(error, TransientProviderError) and idempotent)
            if not retry or last:
                raise error
            self._sleep(attempt, resp.headers.get("Retry-After"))
        raise AssertionError("unreachable")

    def _sleep(self, attempt: int, retry_after: str | None) -> None:
        if retry_after is not None:
            try:
                time.sleep(min(max(0.0, float(retry_after)), self.max_retry_after))
                return
            except ValueError:
                pass
        time.sleep(random.uniform(0, self.retry_delays[attempt]))


def _error_body(resp: httpx.Response) -> Any:
    """A failure's JSON body, or its text as the message (a gateway's HTML 502 names no code)."""
    if not resp.content:
        return {}
    try:
        return resp.json()
    except ValueError:
        return {"error": "", "msg": resp.text[:200]}
