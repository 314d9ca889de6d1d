"""One table: a Compute Engine error code -> the spotfleet error class it becomes.

GCE reports failures two ways, and both go through here:

* a failed call (HTTP 4xx/5xx) whose JSON body carries ``error.errors[].reason``
  (``rateLimitExceeded``, ``quotaExceeded``, ``forbidden``, ``notFound``...): :func:`from_api_error`;
* a zone operation that ends ``DONE`` with ``error.errors[].code`` (``ZONE_RESOURCE_POOL_EXHAUSTED``,
  ``QUOTA_EXCEEDED``, ``VM_MIN_COUNT_NOT_REACHED``...): :func:`from_operation`.

No capacity means "try another pool"; quota blocks the region; auth blocks the provider;
throttling is retried by :data:`RULES` (``GceApi.call``) before it becomes ``RateLimitedError``;
transient server faults are safe to retry with the same requestId. An unknown code is a plain
ProviderError.
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

#: Vendor code or reason -> our error class.
ERROR_TABLE: dict[str, type[ProviderError]] = {
    # the zone (or region) has no room for this shape now
    "ZONE_RESOURCE_POOL_EXHAUSTED": NoCapacityError,
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": NoCapacityError,
    "REGION_RESOURCE_POOL_EXHAUSTED": NoCapacityError,
    "VM_MIN_COUNT_NOT_REACHED": NoCapacityError,
    "resourceExhausted": NoCapacityError,
    # the project's limits (regional or global, the message says which)
    "QUOTA_EXCEEDED": QuotaExceededError,
    "quotaExceeded": QuotaExceededError,
    # throttling
    "rateLimitExceeded": RateLimitedError,
    "userRateLimitExceeded": RateLimitedError,
    "RATE_LIMIT_EXCEEDED": RateLimitedError,
    # credentials and permissions
    "forbidden": AuthError,
    "insufficientPermissions": AuthError,
    "authError": AuthError,
    "unauthorized": AuthError,
    "accessNotConfigured": AuthError,
    "PERMISSION_DENIED": AuthError,
    # gone already
    "notFound": InstanceNotFoundError,
    "RESOURCE_NOT_FOUND": InstanceNotFoundError,
    # the service had a bad moment
    "backendError": TransientProviderError,
    "internalError": TransientProviderError,
    "INTERNAL_ERROR": TransientProviderError,
    "SERVICE_UNAVAILABLE": TransientProviderError,
    "TIMEOUT": TransientProviderError,
}

#: The reasons first, then the HTTP status (``providers.kit.errors``).
TABLE = ErrorTable("gcp", codes=ERROR_TABLE)
#: Throttling is retried always, a 5xx only for reads: a mutation's requestId makes the caller's
#: retry safe, and the executor decides when (``GceApi.call``).
RULES = RetryRules(delays=(0.05, 0.1, 0.2, 0.4, 0.8))


def error_class(code: str, status: int = 0) -> type[ProviderError]:
    """The class for vendor ``code`` (then HTTP ``status``; ``ProviderError`` when neither is known)."""
    return TABLE.error_class(code=code, status=status)


def to_error(code: str, message: str, *, region: str = "", status: int = 0) -> ProviderError:
    return TABLE.error(message or code, code=code, status=status, region=region, limit=100_000)


def from_api_error(err: Any, *, region: str = "") -> ProviderError:
    """A ``google.api_core.exceptions.GoogleAPICallError`` as our error (first ``errors[].reason`` wins)."""
    status = int(getattr(err, "code", 0) or 0)
    reasons = [str(e.get("reason", "")) for e in (getattr(err, "errors", None) or []) if isinstance(e, dict)]
    reason = next((r for r in reasons if r in ERROR_TABLE), reasons[0] if reasons else "")
    message = str(getattr(err, "message", "") or err)
    return to_error(reason, message[:400], region=region, status=status)


def from_operation(errors: list[tuple[str, str]], *, region: str = "", status: int = 0) -> ProviderError:
    """A failed operation's ``(code, message)`` list as one error.

    The most telling code wins: ``VM_MIN_COUNT_NOT_REACHED`` comes before its cause
    (``ZONE_RESOURCE_POOL_EXHAUSTED``), so a specific code later in the list is preferred.
    """
    known = [(c, m) for c, m in errors if c in ERROR_TABLE and c != "VM_MIN_COUNT_NOT_REACHED"]
    code, message = (known or errors or [("", "operation failed")])[0]
    text = "; ".join(m for _, m in errors if m) or code
    return to_error(code, text[:400], region=region, status=status)


def kind_of(err: ProviderError) -> str:
    """The LaunchResult ``error_kind`` word for a capacity shortfall we report instead of raising."""
    return "capacity" if isinstance(err, NoCapacityError) else ""
