"""Lambda Cloud's error table and retry rules (``providers.kit.errors``, ``providers.kit.retry``).

Lambda answers failures as ``{"error": {"code", "message", "suggestion"}}`` with an HTTP status
(https://docs-api.lambda.ai/api/cloud, "Error responses"); the reference asks clients to read
``code``, never the message. :data:`TABLE` maps the documented codes; codes with the
``provider/`` prefix come from Lambda's upstream providers (outages, unavailability) and are
transient; anything else falls back on the HTTP status. ``global/object-does-not-exist`` is a
missing instance on instance calls (InstanceNotFoundError) and a missing instance type, image or
SSH key on a launch, where the client turns it into a plain ProviderError. :func:`to_error` never
includes request headers: the key cannot leak.
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

PROVIDER = "lambda"
NOT_FOUND = "global/object-does-not-exist"
THROTTLED = "global/too-many-requests"

#: ``global/too-many-requests`` is the code the fake and the local cloud give a 429: the reference
#: documents the limit (about one call a second, one launch per 12 seconds), not the body.
TABLE = ErrorTable(
    PROVIDER,
    codes={
        "global/invalid-api-key": AuthError,
        "global/account-inactive": AuthError,
        "global/invalid-address": AuthError,  # billing address refused: nothing can launch
        "instance-operations/launch/insufficient-capacity": NoCapacityError,
        "global/quota-exceeded": QuotaExceededError,
        THROTTLED: RateLimitedError,
        "global/internal-error": TransientProviderError,
        "global/invalid-parameters": ProviderError,
        "global/duplicate": ProviderError,
        "instance-operations/launch/file-system-in-wrong-region": ProviderError,
        NOT_FOUND: InstanceNotFoundError,
    },
)

#: 429s wait for their Retry-After (a throttled launch: the 12-second launch interval, set by the
#: client); 5xx and connection failures are retried for reads only (a launch may have started
#: instances: its tag decides next time).
RULES = RetryRules(throttling=frozenset({THROTTLED}), delays=(1.0, 2.0, 4.0, 8.0, 12.0), max_retry_after=30.0)


def to_error(status: int, body: Any, what: str, *, retry_after: float | None = None) -> ProviderError:
    """The exception for a failed call doing ``what`` (a short phrase: "launch 2 x gpu_1x_a10")."""
    code, msg = "", ""
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        code = str(err.get("code") or "")
        msg = str(err.get("message") or "")
        if err.get("suggestion"):
            msg = f"{msg} ({err['suggestion']})" if msg else str(err["suggestion"])
    elif isinstance(body, dict) and isinstance(body.get("message"), str):
        msg = body["message"]
    text = f"{what}: {msg or code or 'HTTP ' + str(status)}"
    if code.startswith("provider/") and code not in TABLE.codes:
        return TransientProviderError(PROVIDER, text[:400], code=code, retry_after=retry_after)
    return TABLE.error(text, code=code, status=status, retry_after=retry_after)
