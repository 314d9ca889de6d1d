"""One table from an Azure Resource Manager error to our error class (``fleet.errors``).

ARM answers failures as ``{"error": {"code": "<code>", "message": "<text>"}}``, synchronously
(HTTP 4xx/5xx) or as the ``error`` of a failed long-running operation. :data:`ARM_ERRORS` maps the
code; codes it does not list fall back on the HTTP status (:data:`TABLE`).
:func:`to_error` builds the exception from an ``azure.core`` exception; it never includes request
headers, so a bearer token cannot leak into a message.
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
    TransientProviderError,
)
from providers.kit.errors import ErrorTable
from providers.kit.retry import RetryRules

#: The code ``Arm.call`` gives an HTTP 429 (ARM names it several ways, or not at all).
THROTTLED = "TooManyRequests"

#: ARM error code -> our class.
ARM_ERRORS: dict[str, type[ProviderError]] = {
    "AllocationFailed": NoCapacityError,
    "ZonalAllocationFailed": NoCapacityError,
    "OverconstrainedAllocationRequest": NoCapacityError,
    "OverconstrainedZonalAllocationRequest": NoCapacityError,
    "SkuNotAvailable": NoCapacityError,
    "OperationNotAllowed": QuotaExceededError,  # "... exceeding approved LowPriorityCores quota"
    "QuotaExceeded": QuotaExceededError,
    "AuthorizationFailed": AuthError,
    "AuthenticationFailed": AuthError,
    "InvalidAuthenticationToken": AuthError,
    "SubscriptionNotFound": AuthError,
    "TooManyRequests": RateLimitedError,
    "PlatformImageNotFound": ProviderError,  # 404, but a wrong node.image, not a missing resource
    "InvalidParameter": ProviderError,
    "ResourceNotFound": InstanceNotFoundError,
    "NotFound": InstanceNotFoundError,
    "InternalServerError": TransientProviderError,
    "InternalExecutionError": TransientProviderError,
}

#: The ARM codes first, then the HTTP status (``providers.kit.errors``).
TABLE = ErrorTable("azure", codes=ARM_ERRORS)
#: ARM throttles with HTTP 429 and a Retry-After (``Arm.call`` raises it as ``throttled``); nothing
#: else is retried inside the adapter (a create's 5xx is the executor's to replay with its token).
RULES = RetryRules(
    throttling=frozenset({THROTTLED}),
    max_attempts=5,
    base_delay=1.0,
    max_delay=30.0,
    max_retry_after=30.0,
    max_total_seconds=150.0,
)


def error_class(status: int | None, code: str) -> type[ProviderError]:
    """The class for an answer with HTTP ``status`` (None for a failed operation) and ARM ``code``."""
    return TABLE.error_class(code=code, status=status)


def arm_code(err: Any) -> tuple[int | None, str, str]:
    """(HTTP status, ARM code, message) of an ``azure.core.exceptions.AzureError``."""
    status = getattr(err, "status_code", None)
    code, message = "", ""
    inner = getattr(err, "error", None)  # an ODataV4Format, when ARM sent an error body
    if inner is not None:
        code, message = str(getattr(inner, "code", "") or ""), str(getattr(inner, "message", "") or "")
    if not code:
        response = getattr(err, "response", None)
        try:
            body = response.json() if response is not None else None
        except Exception:  # noqa: BLE001  (not JSON: keep the status)
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
