"""One table from an OCI answer to our error class, and OCI's retry rules as data.

OCI answers failures as ``{"code": "<code>", "message": "<text>"}`` with an HTTP status
(https://docs.oracle.com/iaas/Content/API/References/apierrors.htm); the SDK raises them as
``oci.exceptions.ServiceError``. :data:`TABLE` maps the code to our class; codes it does not list
fall back on the status. One answer needs its message read: a launch with no free host is 500
``InternalError`` "Out of host capacity." (OCI's only signal for it; oracle/karpenter-provider-oci
maps it the same way), which :func:`vendor_code` names ``OutOfHostCapacity`` so the table, not
a substring test at each caller, decides it is a capacity shortfall and never retried.

:data:`RULES`: ``TooManyRequests`` (429, sent without ``Retry-After``) is throttling; 5xx and
transport failures are retried only for idempotent calls (reads, and launches, which carry an
``opc-retry-token``); ``LimitExceeded``/``QuotaExceeded`` and capacity are raised at once.
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

OUT_OF_HOST_CAPACITY = "OutOfHostCapacity"

TABLE = ErrorTable(
    "oci",
    codes={
        "NotAuthenticated": AuthError,
        "NotAuthorized": AuthError,
        "SignUpRequired": AuthError,
        "NotAuthorizedOrNotFound": InstanceNotFoundError,  # the only 404 code: unknown id or no access
        "TooManyRequests": RateLimitedError,
        "LimitExceeded": QuotaExceededError,  # Oracle's service limit for the tenancy
        "QuotaExceeded": QuotaExceededError,  # the compartment quota an administrator set
        OUT_OF_HOST_CAPACITY: NoCapacityError,
        "InternalError": TransientProviderError,
        "InternalServerError": TransientProviderError,
        "ServiceUnavailable": TransientProviderError,
        "InvalidParameter": ProviderError,
        "MissingParameter": ProviderError,
        "CannotParseRequest": ProviderError,
        "RelatedResourceNotAuthorizedOrNotFound": ProviderError,
        "IncorrectState": ProviderError,
        "Conflict": ProviderError,
    },
)

RULES = RetryRules(throttling={"TooManyRequests"}, never={OUT_OF_HOST_CAPACITY, "LimitExceeded", "QuotaExceeded"})


def vendor_code(status: int, code: str, message: str) -> str:
    """The code the table is read with: OCI's, except that no free host is ``OutOfHostCapacity``."""
    if status == 500 and "out of host capacity" in message.lower():
        return OUT_OF_HOST_CAPACITY
    return code


def from_service_error(err: Any, what: str, region: str = "") -> ProviderError:
    """Our exception for an ``oci.exceptions.ServiceError`` raised doing ``what``."""
    status = int(getattr(err, "status", 0) or 0)
    code = str(getattr(err, "code", "") or "")
    message = str(getattr(err, "message", "") or "")
    return TABLE.error(
        f"{what}: {message or code or 'HTTP ' + str(status)}",
        code=vendor_code(status, code, message),
        status=status or None,
        region=region,
    )


def from_transport_error(err: Exception, what: str, region: str = "") -> ProviderError:
    """A connection or timeout failure (nothing was answered): transient."""
    return TransientProviderError(
        "oci", f"{what}: {type(err).__name__} talking to OCI", region=region, code="connection"
    )
