"""Deterministic crash points for the reliability tests (inert unless the variable is set).

``SPOTFLEET_TEST_CRASH_AT`` makes the process die at once (``os._exit(137)``, like
``kill -9``: no cleanup, no flush) when ``reached(step)`` is called the chosen way:

* ``<step>``      the first time ``step`` is reached (e.g. ``launch-sent``);
* ``<step>:<k>``  the k-th time ``step`` is reached;
* ``<n>``         at the n-th crash point reached, whatever its name.

``SPOTFLEET_TEST_PAUSE_AT`` (same forms) makes the process stop there instead: it writes
``paused at <step>`` to stderr and sleeps until a signal ends it, so a test can send Ctrl-C
(SIGINT) at a known point rather than after a guessed delay. A pause is taken only on the main
thread (where Python delivers the signal); elsewhere the step passes.
"""

from __future__ import annotations

import os
import sys
import threading
import time

ENV = "SPOTFLEET_TEST_CRASH_AT"
PAUSE_ENV = "SPOTFLEET_TEST_PAUSE_AT"
_counts: dict[str, int] = {}
_mutex = threading.Lock()


def _chosen(target: str, step: str) -> bool:
    name, _, nth = target.partition(":")
    if name.isdigit() and not nth:
        return _counts[""] == int(name)
    return name == step and _counts[step] == int(nth or 1)


def reached(step: str) -> None:
    crash, pause = os.environ.get(ENV), os.environ.get(PAUSE_ENV)
    if not crash and not pause:
        return
    with _mutex:
        _counts[step] = _counts.get(step, 0) + 1
        _counts[""] = _counts.get("", 0) + 1
        if crash and _chosen(crash, step):
            os._exit(137)
        stop = bool(pause) and _chosen(pause, step) and threading.current_thread() is threading.main_thread()
    if stop:
        sys.stderr.write(f"paused at {step}\n")
        sys.stderr.flush()
        while True:  # until a signal: SIGINT raises KeyboardInterrupt here
            time.sleep(3600)
