"""One table from a Vast.ai answer to our error class (``fleet.errors``).

Vast answers failures as ``{"success": false, "error": "<code>", "msg": "<text>"}`` with an
HTTP status. :data:`VENDOR_ERRORS` maps the vendor code to our class; codes it does not list
fall back on the HTTP status (:data:`STATUS_ERRORS`). :func:`to_error` builds the exception;
it never includes request headers, so the API key cannot leak into a message.
"""

from __future__ import annotations

from typing import Any

from fleet.errors import (
    HTTP_STATUS_ERRORS,
    AuthError,
    InstanceNotFoundError,
    NoCapacityError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    TransientProviderError,
)

#: Vast error code -> our class. ``search_quota_exceeded`` is a RateLimitedError raised at once
#: (it resets in minutes, retrying inside one command cannot help).
VENDOR_ERRORS: dict[str, type[ProviderError]] = {
    "auth_error": AuthError,
    "unauthorized": AuthError,
    "no_such_ask": NoCapacityError,            # the offer was rented or withdrawn
    "ask_unavailable": NoCapacityError,
    "no_such_instance": InstanceNotFoundError,
    "rate_limit_exceeded": RateLimitedError,
    "search_quota_exceeded": RateLimitedError,
    "insufficient_credit": QuotaExceededError,  # the account balance is Vast's only spending limit
    "invalid_args": ProviderError,
    "invalid_price": ProviderError,
}

#: HTTP status -> our class, for answers without a known vendor code.
STATUS_ERRORS: dict[int, type[ProviderError]] = {**HTTP_STATUS_ERRORS, 410: NoCapacityError}


def error_class(status: int, code: str) -> type[ProviderError]:
    """The class for an answer with HTTP ``status`` and vendor ``code`` (``""`` when none)."""
    if code in VENDOR_ERRORS:
        return VENDOR_ERRORS[code]
    if status in STATUS_ERRORS:
        return STATUS_ERRORS[status]
    return TransientProviderError if status >= 500 else ProviderError


def to_error(status: int, body: Any, what: str) -> ProviderError:
    """The exception for a failed call doing ``what`` (a short phrase: "create on ask 123")."""
    code, msg = "", ""
    if isinstance(body, dict):
        code = str(body.get("error") or "")
        msg = str(body.get("msg") or body.get("message") or "")
    cls = error_class(status, code)
    text = f"{what}: {msg or code or 'HTTP ' + str(status)}"
    return cls("vast", text[:400], code=code or f"HTTP{status}")
