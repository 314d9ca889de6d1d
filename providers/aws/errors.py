"""One table: an AWS error code -> the spotfleet error class it becomes.

Every AWS call of the adapter goes through :func:`to_error` when it fails, so the executor
sees the same classes for EC2, S3, IAM and STS: no capacity (try another pool), quota (block
the region), auth (block the provider), throttling (retried in :mod:`providers.aws.session`,
then ``RateLimitedError``) and transient server faults. Codes are the documented ones (EC2 API
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


def error_class(code: str) -> type[ProviderError]:
    """The class for vendor ``code`` (``ProviderError`` when the table does not know it)."""
    return ERROR_TABLE.get(code, ProviderError)


def to_error(code: str, message: str, *, region: str = "") -> ProviderError:
    """A spotfleet error for an AWS ``code`` and its message, attributed to ``aws/<region>``."""
    return error_class(code)("aws", message or code, region=region, code=code)


def is_throttle(code: str) -> bool:
    return error_class(code) is RateLimitedError
