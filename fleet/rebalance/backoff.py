"""Which pools to avoid for a while (pure): a decaying back-off, like Karpenter's cache of
unavailable offerings.

A pool that interrupted this fleet or answered "no capacity" is avoided for
``backoff_seconds`` after its latest event; each further event of the same pool within
``backoff_memory_seconds`` doubles that, up to ``backoff_max_seconds``. As events age out
of the memory the back-off shrinks again, so a pool that calmed down is used again.
"""

from __future__ import annotations

from collections.abc import Iterable

from fleet.rebalance.types import PoolEvent
from fleet.spec import Rebalance


def backoff_until(events: Iterable[PoolEvent], now: float, policy: Rebalance) -> dict[str, float]:
    """Pool id -> when its back-off ends, for the pools still backed off at ``now``."""
    recent: dict[str, list[float]] = {}
    for e in events:
        if now - policy.backoff_memory_seconds <= e.at <= now:
            recent.setdefault(e.pool, []).append(e.at)
    out = {}
    for pool, times in recent.items():
        length = min(policy.backoff_seconds * 2 ** (len(times) - 1), policy.backoff_max_seconds)
        until = max(times) + length
        if until > now:
            out[pool] = until
    return out
