"""The ``fleet run`` pid/lock file: one wrapper (and its job) per name on a node.

An exclusive ``flock`` on ``<home>/run/<name>.lock``; the file also holds JSON about the holder
(wrapper pid, job pid, command). The job inherits the locked descriptor, so the lock is held
until both the wrapper and its job are gone: a wrapper killed with -9 while its job still runs
keeps a second start out, and the kernel frees the lock when the last holder dies (no stale
locks to clean up by hand).

Each process in the record is named by pid and identity (start time and boot id,
:mod:`fleet.agent.procid`): ``start``/``boot`` for the wrapper, ``job_start``/``job_boot`` for
the job, so a later start can tell the recorded job from a process that reuses its pid.

:class:`AdoptLock` (``<name>.lock.adopt``) is held by a wrapper that took over a job whose own
wrapper died (see :mod:`fleet.agent.supervisor`): only one rerun can hold it, so two reruns never
both adopt the job. The kernel frees it when that wrapper dies, so the job can be adopted again.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from fleet.agent.procid import identity


class RunLock:
    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def acquire(self, argv: list[str]) -> bool:
        """Take the lock and record this wrapper; False when another holder has it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = _try_flock(self.path)
        if self.fd is None:
            return False
        self.update(**own_identity(), job_pid=None, job_start=None, job_boot=None, argv=argv, started_at=time.time())
        return True

    def update(self, **fields: Any) -> None:
        """Merge ``fields`` into the holder record (only while holding the lock)."""
        assert self.fd is not None, "update() needs the lock"
        _merge(self.fd, self.path, fields)

    def take_over(self, **fields: Any) -> None:
        """Merge ``fields`` into the record without holding the lock: for the one wrapper holding
        the :class:`AdoptLock` while the orphaned job keeps this lock."""
        fd = os.open(self.path, os.O_RDWR)
        try:
            _merge(fd, self.path, fields)
        finally:
            os.close(fd)

    def holder(self) -> dict[str, Any]:
        """What the current (or last) holder recorded; {} when unreadable."""
        try:
            doc = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def release(self) -> None:
        """Close our descriptor; the lock is freed once a still-running job closes its copy too."""
        if self.fd is not None:
            os.close(self.fd)  # never LOCK_UN: that would free the lock under a job still running
            self.fd = None


def _try_flock(path: Path) -> int | None:
    """An open descriptor holding an exclusive flock on ``path``; None when someone else holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def own_identity() -> dict[str, Any]:
    """This process's record fields: ``pid`` plus ``start``/``boot`` where /proc gives them."""
    me = identity(os.getpid())
    return {"pid": os.getpid(), "start": me.start if me else None, "boot": me.boot if me else None}


def _merge(fd: int, path: Path, fields: dict[str, Any]) -> None:
    """Rewrite the record in one write, padded with spaces over the old text and then trimmed, so a
    reader sees the old or the new JSON and never an empty file."""
    try:
        old = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        old = {}
    data = json.dumps({**(old if isinstance(old, dict) else {}), **fields}).encode()
    size = os.fstat(fd).st_size
    os.pwrite(fd, data + b" " * max(0, size - len(data)), 0)
    os.ftruncate(fd, len(data))


class AdoptLock:
    """``<lock>.adopt``: held by the one wrapper watching an adopted job (non-blocking flock)."""

    def __init__(self, run_lock: Path):
        self.path = run_lock.with_name(run_lock.name + ".adopt")
        self.fd: int | None = None

    def acquire(self) -> bool:
        self.fd = _try_flock(self.path)
        if self.fd is None:
            return False
        _merge(self.fd, self.path, {"pid": os.getpid()})
        return True

    def holder_pid(self) -> int | None:
        """The pid the current holder wrote (None before it wrote or when unreadable)."""
        try:
            pid = json.loads(self.path.read_text() or "{}").get("pid")
        except (OSError, ValueError, AttributeError):
            return None
        return pid if isinstance(pid, int) else None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
