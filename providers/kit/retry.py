"""One retry engine for every adapter; each provider's rules are data (:class:`RetryRules`).

Like botocore's retry handlers: a provider says which of its error codes are throttling (always
retried, honouring ``Retry-After``), which are transient (retried always: nothing was done),
which are retryable only when the call is idempotent (a 5xx on a create may have created
something, so only the caller's idempotency token may decide), and which are never retried
although their class would be (``search_quota_exceeded`` resets in minutes). Codes it does not
list are decided by class: ``RateLimitedError`` is throttling, ``TransientProviderError`` is
retried when idempotent, every other ``ProviderError`` is raised (``MalformedResponseError``
too: an unreadable answer is reported, not hidden by a retry that happens to read).

Backoff is exponential with full jitter (``uniform(0, min(max_delay, base_delay * 2**n))``), or
the explicit ``delays`` caps when given; a ``Retry-After`` is obeyed up to ``max_retry_after``.
Attempts are capped (``max_attempts``) and so is the total time slept (``max_total_seconds``):
the last error is raised when either is spent. ``sleep``, ``clock`` and ``rng`` are injectable.

Usage::

    RULES = RetryRules(throttling={"RequestLimitExceeded"}, never={"search_quota_exceeded"})
    retrier = Retrier(RULES)
    data = retrier.call(lambda: api.get("/instances"), idempotent=True)
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from fleet.errors import MalformedResponseError, ProviderError, RateLimitedError, TransientProviderError

T = TypeVar("T")


class Decision(str, Enum):
    """What the engine does with one failed attempt."""

    RAISE = "raise"
    RETRY = "retry"
    RETRY_IF_IDEMPOTENT = "retry-if-idempotent"


@dataclass(frozen=True)
class RetryRules:
    """One provider's retry rules (codes are ``ProviderError.code``: the vendor code, or what the
    provider's :class:`providers.kit.errors.ErrorTable` writes for a bare status, ``HTTP503``)."""

    throttling: Collection[str] = frozenset()
    transient: Collection[str] = frozenset()
    idempotent_only: Collection[str] = frozenset()
    never: Collection[str] = frozenset()
    max_attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 8.0
    delays: tuple[float, ...] | None = None  # explicit per-retry caps (then max_attempts = len + 1)
    max_retry_after: float = 30.0
    max_total_seconds: float = 60.0

    def decide(self, err: ProviderError) -> Decision:
        """The decision for ``err`` by these rules (code first, then class)."""
        code = err.code
        if code in self.never:
            return Decision.RAISE
        if code in self.throttling or code in self.transient:
            return Decision.RETRY
        if code in self.idempotent_only:
            return Decision.RETRY_IF_IDEMPOTENT
        if isinstance(err, RateLimitedError):
            return Decision.RETRY
        if isinstance(err, MalformedResponseError):
            return Decision.RAISE
        if isinstance(err, TransientProviderError):
            return Decision.RETRY_IF_IDEMPOTENT
        return Decision.RAISE

    @property
    def attempts(self) -> int:
        return len(self.delays) + 1 if self.delays is not None else self.max_attempts

    def cap(self, retry: int) -> float:
        """The jitter ceiling before retry number ``retry`` (0-based)."""
        if self.delays is not None:
            return self.delays[min(retry, len(self.delays) - 1)] if self.delays else 0.0
        return min(self.max_delay, self.base_delay * (2**retry))

    def with_delays(self, delays: tuple[float, ...]) -> RetryRules:
        """These rules with explicit delay caps (tests pass tiny ones)."""
        return RetryRules(
            self.throttling,
            self.transient,
            self.idempotent_only,
            self.never,
            self.max_attempts,
            self.base_delay,
            self.max_delay,
            tuple(delays),
            self.max_retry_after,
            self.max_total_seconds,
        )


@dataclass
class Retrier:
    """Runs calls under one provider's :class:`RetryRules`; thread-safe (``rng`` aside, which
    only draws jitter). ``attempts`` counts every attempt made (benchmarks report it)."""

    rules: RetryRules
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    attempts: int = 0

    def delay(self, retry: int, err: ProviderError) -> float:
        """Seconds to wait before retry ``retry`` after ``err``: its Retry-After, else full jitter."""
        if err.retry_after is not None:
            return min(max(0.0, err.retry_after), self.rules.max_retry_after)
        return self.rng.uniform(0.0, self.rules.cap(retry))

    def call(self, fn: Callable[[], T], *, idempotent: bool) -> T:
        """``fn()``, retried as the rules say; raises the last ProviderError when they say stop."""
        start = self.clock()
        slept = 0.0
        for attempt in range(self.rules.attempts):
            self.attempts += 1
            try:
                return fn()
            except ProviderError as err:
                decision = self.rules.decide(err)
                retry = decision is Decision.RETRY or (decision is Decision.RETRY_IF_IDEMPOTENT and idempotent)
                if not retry or attempt == self.rules.attempts - 1:
                    raise
                wait = self.delay(attempt, err)
                if (
                    slept + wait > self.rules.max_total_seconds
                    or self.clock() - start + wait > self.rules.max_total_seconds
                ):
                    raise
                self.sleep(wait)
                slept += wait
        raise AssertionError("unreachable")
