"""Deterministic crash points for the reliability tests (inert unless the variable is set).

``SPOTFLEET_TEST_CRASH_AT`` makes the process die at once (``os._exit(137)``, like
``kill -9``: no cleanup, no flush) when ``reached(step)`` is called the chosen way:

* ``<step>``      the first time ``step`` is reached (e.g. ``launch-sent``);
* ``<step>:<k>``  the k-th time ``step`` is reached;
* ``<n>``         at the n-th crash point reached, whatever its name.
"""

from __future__ import annotations

import os
import threading

ENV = "SPOTFLEET_TEST_CRASH_AT"
_counts: dict[str, int] = {}
_mutex = threading.Lock()


def reached(step: str) -> None:
    target = os.environ.get(ENV)
    if not target:
        return
    with _mutex:
        _counts[step] = _counts.get(step, 0) + 1
        _counts[""] = _counts.get("", 0) + 1
        name, _, nth = target.partition(":")
        if name.isdigit() and not nth:
            hit = _counts[""] == int(name)
        else:
            hit = name == step and _counts[step] == int(nth or 1)
        if hit:
            os._exit(137)
