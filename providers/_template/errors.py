"""Acme's error table and retry rules: the vendor's codes from its API reference (cite the page)."""

from __future__ import annotations

from typing import Any

from fleet.errors import AuthError, NoCapacityError, ProviderError, QuotaExceededError, RateLimitedError
from providers.kit.errors import ErrorTable
from providers.kit.retry import RetryRules

TABLE = ErrorTable(
    "acme",
    codes={
        "invalid-api-key": AuthError,
        "insufficient-capacity": NoCapacityError,
        "quota-exceeded": QuotaExceededError,
        "too-many-requests": RateLimitedError,
    },
)
RULES = RetryRules(throttling=frozenset({"too-many-requests"}))


def to_error(status: int, body: Any, what: str, retry_after: float | None = None) -> ProviderError:
    """The exception for a failed call doing ``what`` (Acme answers ``{"error": {"code", "message"}}``)."""
    error = body.get("error") if isinstance(body, dict) else None
    code = str(error.get("code") or "") if isinstance(error, dict) else ""
    message = str(error.get("message") or "") if isinstance(error, dict) else str((body or {}).get("message", ""))
    return TABLE.error(
        f"{what}: {message or code or 'HTTP ' + str(status)}", code=code, status=status, retry_after=retry_after
    )
