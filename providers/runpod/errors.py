"""RunPod's failures as our error classes: one :class:`providers.kit.errors.ErrorTable`.

REST v2 answers failures as RFC 9457 problems, ``{"title", "status", "detail", "errors"?}``
(``application/problem+json``, https://docs.runpod.io/api-reference-v2/migrate-from-v1), with no
machine-readable code. The create-a-pod reference
(https://docs.runpod.io/api-reference-v2/pods/create-a-pod) says what each status means: ``422`` the body breaks the contract (never retry), ``400`` a
rule is broken *or* the GPU could not be placed ("capacity exhaustion currently carries no
machine-readable code of its own, only a human-readable detail"), ``402`` insufficient balance
(no candidate will succeed), ``403`` the account cannot use that pool (skip the candidate),
``429`` rate limited (``Retry-After`` in seconds), ``5xx`` transient.

:func:`vendor_code` therefore derives our code from the status and, for a ``400``, the
detail's wording; the table maps that code to the class. A ``403`` is the key's lack of access
(AuthError) except on a create, where it is the pool's (the adapter reads it as no capacity).
"""

from __future__ import annotations

import re
from typing import Any

from fleet.errors import (
    AuthError,
    InstanceNotFoundError,
    NoCapacityError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
)
from providers.kit.errors import ErrorTable
from providers.kit.retry import RetryRules

#: A 400 whose detail says this (GPU, data center) could not be placed, as RunPod words it.
_NO_CAPACITY = re.compile(
    r"no (instances|machines|gpus?) (are )?available|not enough (free )?gpus|"
    r"could not (be )?place|out of capacity|no capacity",
    re.I,
)

TABLE = ErrorTable(
    "runpod",
    codes={
        "no-capacity": NoCapacityError,
        "insufficient-balance": QuotaExceededError,  # RunPod's only spending limit is the balance
        "unauthorized": AuthError,
        "forbidden": AuthError,
        "not-found": InstanceNotFoundError,
        "rate-limited": RateLimitedError,
        "invalid-request": ProviderError,
        "conflict": ProviderError,
    },
)
#: 429 is retried after its Retry-After; 5xx, connection failures and unreadable answers only for
#: idempotent calls (the kit's default for those classes): a create may have made a pod.
RULES = RetryRules(throttling=frozenset({"rate-limited"}), max_retry_after=30.0)


def vendor_code(status: int, detail: str) -> str:
    """Our code for a failed call: from the status, and for ``400`` from the ``detail``."""
    if status == 400:
        return "no-capacity" if _NO_CAPACITY.search(detail) else "invalid-request"
    return {
        401: "unauthorized",
        402: "insufficient-balance",
        403: "forbidden",
        404: "not-found",
        409: "conflict",
        422: "invalid-request",
        429: "rate-limited",
    }.get(status, "")


def to_error(status: int, body: Any, what: str, retry_after: float | None = None) -> ProviderError:
    """The exception for a failed call doing ``what`` (the kit's ``JsonClient`` calls this)."""
    detail = problem_text(body)
    return TABLE.error(
        f"{what}: {detail or 'HTTP ' + str(status)}",
        code=vendor_code(status, detail),
        status=status,
        retry_after=retry_after,
    )


def problem_text(body: Any) -> str:
    """The problem's ``detail`` (and validation ``errors``) as one line of provider text."""
    if not isinstance(body, dict):
        return ""
    detail = str(body.get("detail") or body.get("title") or body.get("message") or "")
    errors = body.get("errors")
    if isinstance(errors, list) and errors:
        detail = f"{detail}: {'; '.join(str(e) for e in errors[:5])}" if detail else "; ".join(map(str, errors[:5]))
    return detail
