"""A JSON-over-HTTP client for one vendor account: the REST part every HTTP adapter shares.

``JsonClient(provider, url, auth_headers=..., rules=..., to_error=...)`` sends one call with
``request(method, path, what=..., idempotent=..., schema=...)``:

* retries follow the provider's :class:`providers.kit.retry.RetryRules` (one engine for all);
* a failure (HTTP >= 400) becomes ``to_error(status, body, what, retry_after)`` (the provider's
  error table, ``providers.kit.errors``), the body read as JSON when it is JSON, else
  ``{"message": <text>}`` (a gateway's HTML 502 names no code);
* a connection failure is ``TransientProviderError`` (``code="connection"``), retried for
  idempotent calls only: a create may have reached the vendor, so only its token may decide;
* a 2xx whose body is not JSON, or does not fit ``schema``, is ``MalformedResponseError``
  (``providers.kit.responses``), never an empty answer; an empty 2xx body is ``{}``;
* auth header values are registered as secrets (``fleet.safetext``: masked in any provider text
  that echoes them) and are never part of a message, a log line or ``repr``; a call that needs
  auth when there is none raises ``missing_auth()`` (the adapter's "set $X" error).

``calls`` counts HTTP requests (benchmarks report API calls per instance). httpx is imported when
a client is made, not when the module is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from fleet.errors import ProviderError, TransientProviderError
from fleet.safetext import register_secret
from providers.kit.errors import retry_after_seconds
from providers.kit.responses import check, parse_json
from providers.kit.retry import Retrier, RetryRules

if TYPE_CHECKING:
    import httpx

M = TypeVar("M", bound=BaseModel)
#: ``(status, body, what, retry_after) -> the error``: the provider's error table applied to an answer.
ToError = Callable[[int, Any, str, "float | None"], ProviderError]


class JsonClient:
    """One HTTP client for one account (thread-safe: httpx.Client is)."""

    def __init__(
        self,
        provider: str,
        url: str,
        *,
        rules: RetryRules,
        to_error: ToError,
        auth_headers: Mapping[str, str] | None = None,
        missing_auth: Callable[[], ProviderError] | None = None,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        headers: Mapping[str, str] | None = None,
    ):
        import httpx  # here, not at import: registering the adapter needs no client

        self.provider = provider
        self.url = url.rstrip("/")
        self._auth = dict(auth_headers or {})
        for value in self._auth.values():
            register_secret(value)
        self._missing_auth = missing_auth
        self._to_error = to_error
        self.retrier = Retrier(rules, sleep=sleep)
        self._client = httpx.Client(
            base_url=self.url,
            timeout=timeout,
            headers={"Accept": "application/json", "User-Agent": "spotfleet", **(headers or {})},
        )
        self._lock = threading.Lock()
        self.calls = 0

    def __repr__(self) -> str:
        return f"JsonClient({self.provider!r}, {self.url!r}, auth={'set' if self._auth else 'none'})"

    @property
    def has_auth(self) -> bool:
        return bool(self._auth)

    def close(self) -> None:
        self._client.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        auth: bool = True,
        idempotent: bool = False,
        schema: type[M] | None = None,
    ) -> Any:
        """Send one call (retried as the rules say) and return its JSON body, read as ``schema`` when
        one is given. ``what`` names the operation in errors. Raises ProviderError subclasses."""
        import httpx

        if auth and not self._auth:
            if self._missing_auth is not None:
                raise self._missing_auth()
            raise ProviderError(self.provider, f"{what}: no credentials", code="no-credentials")
        headers = self._auth if auth else {}

        def once() -> Any:
            with self._lock:
                self.calls += 1
            try:
                resp = self._client.request(
                    method, path, params=params or None, headers=headers, json=body if body is not None else None
                )
            except httpx.HTTPError as err:
                raise TransientProviderError(
                    self.provider, f"{what}: {type(err).__name__} talking to {self.url}", code="connection"
                ) from None
            if resp.status_code < 400:
                data = parse_json(resp.content, provider=self.provider, what=what) if resp.content else {}
                return (
                    data
                    if schema is None
                    else check(schema, data, provider=self.provider, what=what, body=resp.content)
                )
            raise self._to_error(
                resp.status_code, error_body(resp), what, retry_after_seconds(resp.headers.get("Retry-After"))
            )

        return self.retrier.call(once, idempotent=idempotent)


def error_body(resp: httpx.Response) -> Any:
    """A failure's JSON body, or its text as the message (a gateway's HTML 502 names no code)."""
    if not resp.content:
        return {}
    try:
        return resp.json()
    except ValueError:
        return {"message": resp.text[:200]}
