"""Turn a termination signal into a flag the training loop checks between steps.

The handler only records the signal (and calls an optional callback, which must be as light);
the final checkpoint is written by the loop itself, outside the handler, because a handler runs
at an arbitrary point of the main thread where heavy I/O or locks can deadlock.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class StopRequest:
    """Set once one of the watched signals arrives; check ``requested`` between steps."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def __bool__(self) -> bool:
        return self.requested

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    def clear(self) -> None:
        self.signum = None

    def uninstall(self) -> None:
        """Put back the handlers that were there before :func:`install_signal_handler`."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()


def install_signal_handler(
    callback: Callable[[int], None] | None = None, signals: Iterable[int] = DEFAULT_SIGNALS
) -> StopRequest:
    """Watch ``signals``; each arrival sets the returned flag, then calls ``callback(signum)``.

    Must be called from the main thread (a Python rule for signal handlers); raises
    ``RuntimeError`` otherwise.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("install_signal_handler must be called from the main thread")
    stop = StopRequest()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.signum = signum
        if callback is not None:
            callback(signum)

    for signum in signals:
        stop._previous[signum] = signal.signal(signum, handle)
    return stop
