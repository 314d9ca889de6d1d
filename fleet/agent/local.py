"""The embedded local cloud: a JSON notice file written before a simulated preemption.

The local cloud writes ``$SPOTFLEET_NOTICE_FILE`` = ``{"action": "terminate", "time": <epoch>,
"wall_deadline": <epoch>}`` a notice window before it preempts the instance. ``time`` is on the
cloud's simulated clock, which may run faster than the wall clock; ``wall_deadline`` is the same
moment on the wall clock and is preferred. Without it, a ``time`` within an hour of the wall
clock is used, else the vendor-like default window (``deadline_assumed``). A half-written
file is simply read again on the next poll.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from fleet.agent.notice import Notice, PollingWatcher, WatcherConfigError

NOTICE_WINDOW = 30.0
_PLAUSIBLE = 3600.0


class LocalWatcher(PollingWatcher):
    """Checks the notice file every ``interval`` s (a stat is cheap: default 0.1 s)."""

    cloud = "local"

    def __init__(self, path: str | Path | None = None, *, interval: float = 0.1):
        super().__init__(interval)
        raw = path or os.environ.get("SPOTFLEET_NOTICE_FILE")
        if not raw:
            raise WatcherConfigError("local: no notice file; pass --notice-file or set $SPOTFLEET_NOTICE_FILE")
        self.path = Path(raw)

    def poll_once(self) -> Notice | None:
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # being written right now: read it again next poll
        if not isinstance(doc, dict):
            return None
        detail = dict(doc)
        when = doc.get("wall_deadline", doc.get("time"))
        now = time.time()
        if isinstance(when, (int, float)) and abs(when - now) < _PLAUSIBLE:
            deadline = float(when)
        else:
            deadline, detail["deadline_assumed"] = now + NOTICE_WINDOW, True
        return Notice(kind=str(doc.get("action", "terminate")), cloud=self.cloud, deadline=deadline, detail=detail)
