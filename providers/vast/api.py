"""The Vast.ai REST client: base URL, Bearer key, JSON, retried by the kit's engine.

``VastApi(url, key)`` talks to ``$SPOTFLEET_VAST_URL`` or ``https://console.vast.ai`` over
httpx (the official SDK pulls about 70 MB of unrelated packages), imported when a client is made.
Contract:

* retries follow ``providers.vast.errors.RULES`` (``providers.kit.retry``): a 429
  ``rate_limit_exceeded`` after its ``Retry-After`` or a jittered delay below the next of
  ``retry_delays``, ``search_quota_exceeded`` at once; 5xx and connection failures only for reads
  (``idempotent=True``): a create that failed that way may have created something, so it is
  raised (TransientProviderError) and the caller's idempotency token decides on the next attempt;
* every failure becomes one of the classes of ``providers.vast.errors.TABLE``; a 2xx whose body is not
  JSON, or does not fit the ``schema`` asked for (``providers.vast.schemas``), is
  MalformedResponseError (``providers.kit.responses``), never an empty answer;
* the key travels only in the ``Authorization`` header and is never part of a message, a
  log line or ``repr``. ``calls`` counts HTTP requests (the benchmark reports it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from fleet.api_keys import vast_api_key, vast_url
from fleet.errors import AuthError
from providers.kit.http import JsonClient
from providers.vast.errors import RULES, to_error

#: Seconds slept before each retry (full jitter below each value) when no Retry-After is given.
RETRY_DELAYS = RULES.delays or ()
M = TypeVar("M", bound=BaseModel)


def _no_key() -> AuthError:
    return AuthError(
        "vast", "no API key: set $VAST_API_KEY or write it to ~/.config/vastai/vast_api_key", code="no-api-key"
    )


class VastApi(JsonClient):
    """One HTTP client for one Vast account (the kit's ``JsonClient`` with Vast's rules)."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        sleep: Callable[[float], None] = time.sleep,
    ):
        key = api_key if api_key is not None else vast_api_key()
        super().__init__(
            "vast",
            url or vast_url(),
            rules=RULES.with_delays(tuple(retry_delays)),
            to_error=lambda status, body, what, after: to_error(status, body, what, retry_after=after),
            auth_headers={"Authorization": f"Bearer {key}"} if key else {},
            missing_auth=_no_key,
            timeout=timeout,
            sleep=sleep,
        )

    def __repr__(self) -> str:
        return f"VastApi({self.url!r}, key={'set' if self.has_auth else 'none'})"

    @property
    def has_key(self) -> bool:
        return self.has_auth

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
        """``JsonClient.request`` with ``params`` values that are not strings JSON-encoded, as the
        official client does."""
        query = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (params or {}).items()}
        return super().request(
            method, path, what=what, params=query or None, body=body, auth=auth, idempotent=idempotent, schema=schema
        )
