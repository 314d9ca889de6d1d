"""The node agent: interruption-notice watchers, the notice response, and the restart wrapper.

- :mod:`fleet.agent.notice`   ``Notice``, the ``Watcher`` interface and the robust polling loop
- :mod:`fleet.agent.aws` / ``gcp`` / ``azure`` / ``vast`` / ``local``   one watcher per source
- :mod:`fleet.agent.detect`   ``make_watcher(cloud)`` and ``auto`` detection
- :mod:`fleet.agent.hooks`    signal / command hooks fired on a notice
- :mod:`fleet.agent.runner`   ``respond(notice, hook, ...)``: hook -> final checkpoint -> ack -> report
- :mod:`fleet.agent.supervisor`  ``fleet run``: resume, restart on crash, agent alongside, lock file
"""

from fleet.agent.detect import CLOUDS, WatcherOptions, detect_cloud, make_watcher
from fleet.agent.notice import Notice, PollingWatcher, Watcher, WatcherConfigError
from fleet.agent.runner import Outcome, respond

__all__ = [
    "CLOUDS",
    "Notice",
    "Outcome",
    "PollingWatcher",
    "Watcher",
    "WatcherConfigError",
    "WatcherOptions",
    "detect_cloud",
    "make_watcher",
    "respond",
]
