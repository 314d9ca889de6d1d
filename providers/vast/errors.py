"""Vast.ai's error table and retry rules (``providers.kit.errors``, ``providers.kit.retry``).

Vast answers failures as ``{"success": false, "error": "<code>", "msg": "<text>"}`` with an
HTTP status. :data:`TABLE` maps the vendor code to our class; codes it does not list fall back on
the HTTP status (410: the offer is gone). :func:`to_error` builds the exception from an answer;
it never includes request headers, so the API key cannot leak into a message.
"""

from __future__ import annotations

from typing import Any

from fleet.errors import (
    AuthError,
    InstanceNotFoundError,
    NoCapacityError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
)
from providers.kit.errors import ErrorTable
from providers.kit.retry import RetryRules

TABLE = ErrorTable(
    "vast",
    codes={
        "auth_error": AuthError,
        "unauthorized": AuthError,
        "no_such_ask": NoCapacityError,  # the offer was rented or withdrawn
        "ask_unavailable": NoCapacityError,
        "no_such_instance": InstanceNotFoundError,
        "rate_limit_exceeded": RateLimitedError,
        "search_quota_exceeded": RateLimitedError,
        "insufficient_credit": QuotaExceededError,  # the account balance is Vast's only spending limit
        "invalid_args": ProviderError,
        "invalid_price": ProviderError,
    },
    statuses={410: NoCapacityError},
)

#: ``rate_limit_exceeded`` (429) waits for its Retry-After; ``search_quota_exceeded`` is raised at
#: once (it resets in minutes: retrying inside one command cannot help); 5xx and connection
#: failures are retried for reads only (a create may have happened: its label decides next time).
RULES = RetryRules(
    throttling=frozenset({"rate_limit_exceeded"}),
    never=frozenset({"search_quota_exceeded"}),
    delays=(0.5, 1.0, 2.0, 4.0, 8.0),
    max_retry_after=30.0,
)


def to_error(status: int, body: Any, what: str, *, retry_after: float | None = None) -> ProviderError:
    """The exception for a failed call doing ``what`` (a short phrase: "create on ask 123")."""
    code, msg = "", ""
    if isinstance(body, dict):
        code = str(body.get("error") or "")
        msg = str(body.get("msg") or body.get("message") or "")
    return TABLE.error(
        f"{what}: {msg or code or 'HTTP ' + str(status)}", code=code, status=status, retry_after=retry_after
    )
