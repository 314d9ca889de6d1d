"""A tiny stdlib HTTP client for metadata services (no proxies, short timeouts).

Metadata endpoints are link-local and must never go through ``$http_proxy``, and the agent must
not need third-party packages on a bare node, so this wraps ``urllib`` with an opener that
ignores proxies. :func:`request` returns every HTTP status as a :class:`Response` (404 is an
answer, not an error) and raises :class:`~fleet.agent.notice.TransientError` only for transport
failures; :func:`expect` turns a 5xx/429 into a retryable error.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.agent.notice import TransientError

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body as JSON; a garbled body is a transient failure (a proxy page, a cut stream)."""
        try:
            return json.loads(self.body)
        except ValueError as err:
            raise TransientError(f"unparseable JSON body ({err})") from err

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object; anything else is a transient failure."""
        doc = self.json()
        if not isinstance(doc, dict):
            raise TransientError(f"expected a JSON object, got {type(doc).__name__}")
        return doc


def request(
    method: str, url: str, *, headers: Mapping[str, str] | None = None, body: bytes | None = None, timeout: float = 2.0
) -> Response:
    """Send one request; any HTTP status comes back, transport failures raise TransientError."""
    req = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return Response(resp.status, _lower(resp.headers), resp.read())
    except urllib.error.HTTPError as err:
        try:
            data = err.read()
        except OSError:
            data = b""
        return Response(err.code, _lower(err.headers or {}), data)
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise TransientError(f"{method} {url}: {reason}") from err


def expect(resp: Response, what: str) -> Response:
    """Raise TransientError for 5xx and 429 (honouring ``Retry-After``); return other answers."""
    if resp.status == 429 or resp.status >= 500:
        retry_after = None
        value = resp.headers.get("retry-after")
        if value:
            try:
                retry_after = max(0.0, float(value))
            except ValueError:
                retry_after = None
        raise TransientError(f"{what}: HTTP {resp.status}", retry_after=retry_after)
    return resp


def _lower(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}
