"""How each simulated vendor looks from outside: ids, error codes, notices.

The local cloud simulates every catalog provider under its real name, so the executor
and the operator see vendor-shaped data: ``i-0...`` instance ids and
``InsufficientInstanceCapacity`` for AWS, numeric ids and ``ZONE_RESOURCE_POOL_EXHAUSTED``
for GCP, and so on. The AWS, GCP, Azure and Vast codes are the documented ones
(see the cloud API notes), OCI's from its API error reference, Lambda's from its API reference
(the 429 code is the adapter's, as the reference documents the limit but not the body), and RunPod's
are those its adapter derives from REST v2 problems. The facts about a vendor that its adapter declares
(interruption notice, spot or not) come from its registration record (``providers.registry.record``),
so the local cloud simulates what the real adapter states.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from fleet.errors import (
    AuthError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    TransientProviderError,
)

#: Fault kinds ``LocalCloud.inject_fault`` accepts.
FAULT_KINDS = ("capacity", "quota", "throttle", "server-error", "auth")

#: Which error class a raised fault becomes (capacity is reported, never raised).
FAULT_ERRORS: dict[str, type[ProviderError]] = {
    "quota": QuotaExceededError,
    "throttle": RateLimitedError,
    "server-error": TransientProviderError,
    "auth": AuthError,
}

#: LaunchResult.error_kind for each fault kind.
ERROR_KIND = {
    "capacity": "capacity",
    "quota": "quota",
    "throttle": "rate-limit",
    "server-error": "transient",
    "auth": "auth",
}


def _aws_id(digest: bytes) -> str:
    return "i-0" + digest.hex()[:16]


def _numeric_id(digits: int) -> Callable[[bytes], str]:
    def make(digest: bytes) -> str:
        n = int.from_bytes(digest[:8], "big") % (9 * 10 ** (digits - 1))
        return str(10 ** (digits - 1) + n)

    return make


def _guid(digest: bytes) -> str:
    return str(uuid.UUID(bytes=digest[:16]))


def _hex32(digest: bytes) -> str:
    return digest.hex()[:32]


def _ocid(digest: bytes) -> str:
    return "ocid1.instance.oc1.iad." + digest.hex()[:48]


def _pod_id(digest: bytes) -> str:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    n = int.from_bytes(digest[:10], "big")
    return "".join(alphabet[(n >> (5 * i)) % 36] for i in range(14))


@dataclass(frozen=True)
class Vendor:
    """One simulated provider: its id shape, error codes and risk; the rest is its record's."""

    name: str
    make_id: Callable[[bytes], str]
    codes: dict[str, str] = field(default_factory=dict)  # fault kind (+ a few extras) -> vendor code
    hazard_per_hour: float = 0.02  # background spot preemptions per instance-hour, on top of the trace

    @property
    def notice_seconds(self) -> int:
        """The interruption notice its real adapter's record declares."""
        from providers.registry import record

        return record(self.name).notice_seconds

    def code(self, kind: str) -> str:
        return self.codes.get(kind, kind)


VENDORS: dict[str, Vendor] = {
    v.name: v
    for v in (
        Vendor(
            "aws",
            _aws_id,
            {
                "capacity": "InsufficientInstanceCapacity",
                "quota": "MaxSpotInstanceCountExceeded",
                "throttle": "RequestLimitExceeded",
                "server-error": "InternalError",
                "auth": "AuthFailure",
                "mismatch": "IdempotentParameterMismatch",
                "price": "SpotMaxPriceTooLow",
                "unknown-pool": "InvalidParameterValue",
            },
        ),
        Vendor(
            "gcp",
            _numeric_id(19),
            {
                "capacity": "ZONE_RESOURCE_POOL_EXHAUSTED",
                "quota": "QUOTA_EXCEEDED",
                "throttle": "rateLimitExceeded",
                "server-error": "backendError",
                "auth": "UNAUTHENTICATED",
                "mismatch": "ALREADY_EXISTS",
                "price": "ZONE_RESOURCE_POOL_EXHAUSTED",
                "unknown-pool": "RESOURCE_NOT_FOUND",
            },
        ),
        Vendor(
            "azure",
            _guid,
            {
                "capacity": "AllocationFailed",
                "quota": "OperationNotAllowed",
                "throttle": "TooManyRequests",
                "server-error": "InternalServerError",
                "auth": "AuthenticationFailed",
                "mismatch": "Conflict",
                "price": "OverconstrainedAllocationRequest",
                "unknown-pool": "SkuNotAvailable",
            },
        ),
        Vendor(
            "vast",
            _numeric_id(8),
            {
                "capacity": "no_such_ask",
                "quota": "insufficient_credit",
                "throttle": "rate_limit_exceeded",
                "server-error": "server_error",
                "auth": "auth_error",
                "mismatch": "invalid_args",
                "price": "invalid_price",
                "unknown-pool": "no_such_ask",
            },
            hazard_per_hour=0.05,
        ),
        Vendor(
            "lambda",
            _hex32,
            {
                "capacity": "instance-operations/launch/insufficient-capacity",
                "quota": "global/quota-exceeded",
                "throttle": "global/too-many-requests",
                "server-error": "global/internal-error",
                "auth": "global/invalid-api-key",
                "mismatch": "global/invalid-parameters",
                "price": "global/invalid-parameters",
                "unknown-pool": "global/object-does-not-exist",
            },
        ),
        Vendor(
            "runpod",
            _pod_id,  # the codes the RunPod adapter derives from REST v2 problems
            {
                "capacity": "no-capacity",
                "quota": "insufficient-balance",
                "throttle": "rate-limited",
                "server-error": "HTTP502",
                "auth": "unauthorized",
                "mismatch": "invalid-request",
                "price": "invalid-request",
                "unknown-pool": "invalid-request",
            },
            hazard_per_hour=0.03,
        ),
        Vendor(
            "oci",
            _ocid,
            {
                "capacity": "OutOfHostCapacity",
                "quota": "LimitExceeded",
                "throttle": "TooManyRequests",
                "server-error": "InternalServerError",
                "auth": "NotAuthenticated",
                "mismatch": "IncorrectState",
                "price": "InvalidParameter",
                "unknown-pool": "InvalidParameter",
            },
        ),
    )
}
