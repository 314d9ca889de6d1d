"""One table: an AWS error code -> the spotfleet error class it becomes.

Every AWS call of the adapter goes through :func:`to_error` when it fails, so the executor
sees the same classes for EC2, S3, IAM and STS: no capacity (try another pool), quota (block
the region), auth (block the provider), throttling (retried by :data:`RULES` in
:mod:`providers.aws.session`, then ``RateLimitedError``) and transient server faults. Codes are the documented ones (EC2 API
error reference; CreateFleet ``Errors[].ErrorCode``). An unknown code is a plain ProviderError.
"""

from __future__ import annotations

from fleet.errors import (
    AuthError,
    NoCapacityError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    TransientProviderError,
)
from providers.kit.errors import ErrorTable
from providers.kit.retry import RetryRules

#: Vendor code -> our error class.
ERROR_TABLE: dict[str, type[ProviderError]] = {
    # the pool has no capacity now (CreateFleet Errors, RunInstances)
    "InsufficientInstanceCapacity": NoCapacityError,
    "InsufficientCapacity": NoCapacityError,
    "InsufficientHostCapacity": NoCapacityError,
    "UnfulfillableCapacity": NoCapacityError,
    "SpotMaxPriceTooLow": NoCapacityError,
    "Unsupported": NoCapacityError,
    # the account's limits
    "MaxSpotInstanceCountExceeded": QuotaExceededError,
    "VcpuLimitExceeded": QuotaExceededError,
    "InstanceLimitExceeded": QuotaExceededError,
    "MaxFleetCountExceeded": QuotaExceededError,
    # throttling
    "RequestLimitExceeded": RateLimitedError,
    "Throttling": RateLimitedError,
    "ThrottlingException": RateLimitedError,
    "TooManyRequestsException": RateLimitedError,
    "SlowDown": RateLimitedError,
    # credentials and permissions
    "AuthFailure": AuthError,
    "UnauthorizedOperation": AuthError,
    "AccessDenied": AuthError,
    "AccessDeniedException": AuthError,
    "InvalidClientTokenId": AuthError,
    "ExpiredToken": AuthError,
    "ExpiredTokenException": AuthError,
    "SignatureDoesNotMatch": AuthError,
    "OptInRequired": AuthError,
    "NoCredentials": AuthError,
    # the service had a bad moment: safe to retry with the same token
    "InternalError": TransientProviderError,
    "InternalFailure": TransientProviderError,
    "ServiceUnavailable": TransientProviderError,
    "Unavailable": TransientProviderError,
    "EndpointConnectionError": TransientProviderError,
}


TABLE = ErrorTable("aws", codes=ERROR_TABLE)
#: Throttling (by class: the table's RateLimitedError codes) is retried with full jitter below
#: these delays; ``Aws.call`` calls nothing idempotent here, so a server fault is raised at once
#: and the launch's client token decides on the next attempt.
RULES = RetryRules(delays=(0.2, 0.5, 1.0, 2.0))


def error_class(code: str) -> type[ProviderError]:
    """The class for vendor ``code`` (``ProviderError`` when the table does not know it)."""
    return TABLE.error_class(code=code)


def to_error(code: str, message: str, *, region: str = "") -> ProviderError:
    """A spotfleet error for an AWS ``code`` and its message, attributed to ``aws/<region>``."""
    return TABLE.error(message or code, code=code, region=region, limit=100_000)
