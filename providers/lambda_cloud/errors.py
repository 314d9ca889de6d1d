"""One table from a Lambda Cloud API failure to our error class (``fleet.errors``).

Lambda answers failures as ``{"error": {"code", "message", "suggestion"}}`` with an HTTP status
(https://docs-api.lambda.ai/api/cloud, "Error responses"); the reference asks clients to read
``code``, never the message. :data:`VENDOR_ERRORS` maps the documented codes; codes with the
``provider/`` prefix come from Lambda's upstream providers (outages, unavailability) and are
transient; anything else falls back on the HTTP status (:data:`STATUS_ERRORS`).
``global/object-does-not-exist`` names a missing instance on instance calls but a missing
instance type, image or SSH key on a launch, so the caller says which class it means
(``not_found``). :func:`to_error` never includes request headers: the key cannot leak.
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

PROVIDER = "lambda"
NOT_FOUND = "global/object-does-not-exist"

#: Documented Lambda error code -> our class (``global/too-many-requests`` is the code the fake
#: and the local cloud use for a 429; the reference documents the limit, not the body).
VENDOR_ERRORS: dict[str, type[ProviderError]] = {
    "global/invalid-api-key": AuthError,
    "global/account-inactive": AuthError,
    "global/invalid-address": AuthError,             # billing address refused: nothing can launch
    "instance-operations/launch/insufficient-capacity": NoCapacityError,
    "global/quota-exceeded": QuotaExceededError,
    "global/too-many-requests": RateLimitedError,
    "global/internal-error": TransientProviderError,
    "global/invalid-parameters": ProviderError,
    "global/duplicate": ProviderError,
    "instance-operations/launch/file-system-in-wrong-region": ProviderError,
}

#: HTTP status -> our class, for an answer whose code the table does not know.
STATUS_ERRORS: dict[int, type[ProviderError]] = dict(HTTP_STATUS_ERRORS)


def error_class(status: int, code: str, not_found: type[ProviderError] = InstanceNotFoundError) -> type[ProviderError]:
    """The class for an answer with HTTP ``status`` and Lambda ``code`` (``""`` when none)."""
    if code == NOT_FOUND:
        return not_found
    if code in VENDOR_ERRORS:
        return VENDOR_ERRORS[code]
    if code.startswith("provider/"):
        return TransientProviderError
    if status in STATUS_ERRORS:
        return STATUS_ERRORS[status] if status != 404 else not_found
    return TransientProviderError if status >= 500 else ProviderError


def to_error(status: int, body: Any, what: str, *, region: str = "",
             not_found: type[ProviderError] = InstanceNotFoundError) -> ProviderError:
    """The exception for a failed call doing ``what`` (a short phrase: "launch gpu_1x_a10")."""
    code, msg = "", ""
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        code = str(err.get("code") or "")
        msg = str(err.get("message") or "")
        if err.get("suggestion"):
            msg = f"{msg} ({err['suggestion']})" if msg else str(err["suggestion"])
    elif isinstance(body, dict) and isinstance(body.get("message"), str):
        msg = body["message"]
    cls = error_class(status, code, not_found)
    text = f"{what}: {msg or code or 'HTTP ' + str(status)}"
    return cls(PROVIDER, text[:400], region=region, code=code or f"HTTP{status}")
