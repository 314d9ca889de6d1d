"""What every watcher reports, and the loop that turns a flaky metadata service into a notice.

A :class:`Notice` says the node is going away (or, for ``rebalance``, is at elevated risk):
``kind`` is the vendor's word (``terminate``, ``stop``, ``hibernate``, ``rebalance``,
``preempt``, ``outbid``, ``stopping``, ``gone``), ``deadline`` the epoch second by which the
node is expected to be gone (always set: where the vendor gives no time, the watcher fills in
its documented minimum and says so with ``detail["deadline_assumed"] = True``).

A watcher implements :meth:`PollingWatcher.poll_once`; the shared :meth:`wait_for_notice` loop
retries every transient failure (timeouts, refused connections, 5xx, expired tokens, and any
answer in an unexpected shape) with a capped backoff and never raises them, so a metadata
hiccup can never take the node agent down.
Only configuration errors (:class:`WatcherConfigError`: a refused API key, a missing notice
file setting) escape, because retrying cannot fix them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

from fleet.errors import FleetError

log = logging.getLogger("fleet.agent")

#: Notice kinds that are advice, not an eviction: the node may well keep running.
ADVISORY_KINDS = frozenset({"rebalance"})


class WatcherConfigError(FleetError):
    """The watcher is set up wrongly (bad key, missing setting); retrying cannot help."""


class TransientError(Exception):
    """A metadata/API hiccup worth retrying (timeout, refused connection, 5xx, 401 token)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Notice:
    """An interruption notice as seen on the node."""

    kind: str
    deadline: float
    detail: dict[str, Any] = field(default_factory=dict)
    cloud: str = ""
    received_at: float = field(default_factory=time.time)

    @property
    def final(self) -> bool:
        """True when the node is being taken away (False for advice such as ``rebalance``)."""
        return self.kind not in ADVISORY_KINDS

    def seconds_left(self, now: float | None = None) -> float:
        return self.deadline - (time.time() if now is None else now)

    def to_json(self) -> dict[str, Any]:
        return {
            "cloud": self.cloud,
            "kind": self.kind,
            "deadline": self.deadline,
            "received_at": self.received_at,
            "detail": self.detail,
        }


class Watcher(Protocol):
    """One interruption-notice source (a cloud's metadata service, an API, a file)."""

    cloud: str

    def wait_for_notice(self, stop: threading.Event | None = None) -> Notice | None:
        """Block until a notice arrives (returned) or ``stop`` is set (None)."""
        ...

    def acknowledge(self, notice: Notice) -> bool:
        """Tell the cloud the node is ready to go (Azure StartRequests); True when something was sent."""
        ...


class PollingWatcher:
    """Base of every watcher: calls :meth:`poll_once` until it returns a notice.

    ``interval`` is the pause between polls (0 for long-polling sources such as GCE's
    ``wait_for_change``). Transient failures back off from ``interval`` (at least 0.2 s)
    doubling up to ``max_backoff``, or by the server's ``Retry-After`` when it gives one.
    """

    cloud = "?"

    def __init__(self, interval: float, *, max_backoff: float = 2.0):
        self.interval = interval
        self.max_backoff = max_backoff
        self.failures = 0

    def poll_once(self) -> Notice | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def acknowledge(self, notice: Notice) -> bool:
        return False

    def wait_for_notice(self, stop: threading.Event | None = None) -> Notice | None:
        stop = stop or threading.Event()
        while not stop.is_set():
            try:
                notice = self.poll_once()
            except WatcherConfigError:
                raise
            except Exception as err:  # TransientError, or an answer in a shape nobody documented
                self.failures += 1
                retry_after = err.retry_after if isinstance(err, TransientError) else None
                delay = retry_after if retry_after is not None else self._backoff()
                if self.failures == 1 or self.failures % 30 == 0:
                    log.warning(
                        "%s metadata hiccup (%s); retrying in %.1f s [%d in a row]",
                        self.cloud,
                        err,
                        delay,
                        self.failures,
                    )
                stop.wait(delay)
                continue
            if self.failures:
                log.info("%s metadata answering again after %d failed polls", self.cloud, self.failures)
                self.failures = 0
            if notice is not None:
                return notice
            if self.interval > 0:
                stop.wait(self.interval)
        return None

    def _backoff(self) -> float:
        base = max(self.interval, 0.2)
        return min(base * 2 ** min(self.failures - 1, 10), self.max_backoff)


def notice_deadline(
    value: object, parse: Callable[[str], float], window: float, detail: dict[str, Any]
) -> tuple[float, dict[str, Any]]:
    """The vendor's deadline parsed with ``parse``; when absent or garbled, now + ``window``.

    Returns ``(deadline, detail)`` where detail gains ``deadline_assumed: True`` in the fallback.
    """
    if value:
        try:
            return parse(str(value)), detail
        except ValueError:
            log.warning("unparseable notice time %r; assuming %.0f s", value, window)
    return time.time() + window, {**detail, "deadline_assumed": True}


def parse_iso8601(text: str) -> float:
    """``2026-11-29T08:22:00Z`` -> epoch seconds; ValueError when unparseable."""
    return datetime.fromisoformat(text.strip().replace("Z", "+00:00")).timestamp()


def parse_rfc1123(text: str) -> float:
    """``Mon, 19 Sep 2016 18:29:47 GMT`` -> epoch seconds; ValueError when unparseable."""
    try:
        return parsedate_to_datetime(text.strip()).timestamp()
    except (TypeError, IndexError) as err:
        raise ValueError(f"not an RFC 1123 date: {text!r}") from err
