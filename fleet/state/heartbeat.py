"""A daemon thread that renews a lock lease while its holder works.

``Heartbeat(beat, every)`` calls ``beat()`` every ``every`` seconds until ``stop()``. A beat
that raises ``FleetLockedError`` (the lease was lost to another holder) ends the heartbeat: the
holder's own ``refresh_lock`` then raises and stops it. Any other ``FleetError`` (the store is
busy or briefly unreachable) is retried on the next beat; the lease's TTL covers a few misses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from fleet.errors import FleetError, FleetLockedError


class Heartbeat:
    def __init__(self, beat: Callable[[], None], every: float, *, name: str = "spotfleet-lease"):
        self._beat = beat
        self._every = every
        self._stopped = threading.Event()
        self.lost = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._every):
            try:
                self._beat()
            except FleetLockedError:
                self.lost = True
                return
            except FleetError:
                continue

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()
