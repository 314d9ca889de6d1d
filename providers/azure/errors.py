"""One table from an Azure Resource Manager error to our error class (``fleet.errors``).

ARM answers failures as ``{"error": {"code": "<code>", "message": "<text>"}}``, synchronously
(HTTP 4xx/5xx) or as the ``error`` of a failed long-running operation. :data:`ARM_ERRORS` maps the
code; codes it does not list fall back on the HTTP status (:data:`STATUS_ERRORS`).
:func:`to_error` builds the exception from an ``azure.core`` exception; it never includes request
headers, so a bearer token cannot leak into a message.
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

#: ARM error code -> our class.
ARM_ERRORS: dict[str, type[ProviderError]] = {
    "AllocationFailed": NoCapacityError,
    "ZonalAllocationFailed": NoCapacityError,
    "OverconstrainedAllocationRequest": NoCapacityError,
    "OverconstrainedZonalAllocationRequest": NoCapacityError,
    "SkuNotAvailable": NoCapacityError,
    "OperationNotAllowed": QuotaExceededError,      # "... exceeding approved LowPriorityCores quota"
    "QuotaExceeded": QuotaExceededError,
    "AuthorizationFailed": AuthError,
    "AuthenticationFailed": AuthError,
    "InvalidAuthenticationToken": AuthError,
    "SubscriptionNotFound": AuthError,
    "TooManyRequests": RateLimitedError,
    "PlatformImageNotFound": ProviderError,         # 404, but a wrong node.image, not a missing resource
    "InvalidParameter": ProviderError,
    "ResourceNotFound": InstanceNotFoundError,
    "NotFound": InstanceNotFoundError,
    "InternalServerError": TransientProviderError,
    "InternalExecutionError": TransientProviderError,
}

#: HTTP status -> our class, for answers without a known code.
STATUS_ERRORS = HTTP_STATUS_ERRORS


def error_class(status: int | None, code: str) -> type[ProviderError]:
    """The class for an answer with HTTP ``status`` (None for a failed operation) and ARM ``code``."""
    if code in ARM_ERRORS:
        return ARM_ERRORS[code]
    if status in STATUS_ERRORS:
        return STATUS_ERRORS[status]
    return TransientProviderError if (status or 0) >= 500 else ProviderError


def arm_code(err: Any) -> tuple[int | None, str, str]:
    """(HTTP status, ARM code, message) of an ``azure.core.exceptions.AzureError``."""
    status = getattr(err, "status_code", None)
    code, message = "", ""
    inner = getattr(err, "error", None)          # an ODataV4Format, when ARM sent an error body
    if inner is not None:
        code, message = str(getattr(inner, "code", "") or ""), str(getattr(inner, "message", "") or "")
    if not code:
        response = getattr(err, "response", None)
        try:
            body = response.json() if response is not None else None
        except Exception:   # noqa: BLE001  (not JSON: keep the status)
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            code, message = str(body["error"].get("code") or ""), str(body["error"].get("message") or "")
    if not message:
        message = str(getattr(err, "message", "") or err).splitlines()[0]
    return status, code, message


def to_error(err: Exception, what: str) -> ProviderError:
    """Our exception for an Azure SDK failure while doing ``what`` (a short phrase)."""
    status, code, message = arm_code(err)
    cls = error_class(status, code)
    text = f"{what}: {code + ': ' if code else ''}{message or 'HTTP ' + str(status)}"
    return cls("azure", text[:400], code=code or f"HTTP{status}")
