"""The ``fleet run`` pid/lock file: one wrapper (and its job) per name on a node.

An exclusive ``flock`` on ``<home>/run/<name>.lock``; the file also holds JSON about the holder
(wrapper pid, job pid, command). The job inherits the locked descriptor, so the lock is held
until both the wrapper and its job are gone: a wrapper killed with -9 while its job still runs
keeps a second start out, and the kernel frees the lock when the last holder dies (no stale
locks to clean up by hand).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any


class RunLock:
    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def acquire(self, argv: list[str]) -> bool:
        """Take the lock and record this wrapper; False when another holder has it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self.fd = fd
        self.update(pid=os.getpid(), job_pid=None, argv=argv, started_at=time.time())
        return True

    def update(self, **fields: Any) -> None:
        """Merge ``fields`` into the holder record (only while holding the lock)."""
        assert self.fd is not None, "update() needs the lock"
        record = {**self.holder(), **fields}
        data = json.dumps(record).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

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
