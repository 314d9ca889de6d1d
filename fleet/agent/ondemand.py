"""On-demand nodes (Lambda): the provider never takes the machine back, so there is no notice.

The watcher of ``fleet run --cloud none`` never reports one; the node agent still supervises the
job and writes its periodic checkpoints, which carry the work across a node lost some other way
(a host failure, a `fleet down`).
"""

from __future__ import annotations

from fleet.agent.notice import Notice, PollingWatcher


class OnDemandWatcher(PollingWatcher):
    """Polls nothing (one wake-up a minute, so a stop is seen)."""

    cloud = "none"

    def __init__(self, *, interval: float = 60.0):
        super().__init__(interval)

    def poll_once(self) -> Notice | None:
        return None
