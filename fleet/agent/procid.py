"""Which process a pid names: identity by (pid, start time, boot), and waiting for a non-child to end.

A pid alone is not an identity: once a process exits the kernel may hand its pid to another one.
:func:`identity` records the process start time (clock ticks since boot, ``/proc/<pid>/stat``
field 22) and the boot id; :func:`same_process` is True only while that very process runs, so a
recycled pid, a zombie or a record from before a reboot never matches. Without ``/proc`` (not
Linux) there is no identity and nothing matches: callers then refuse to act on the pid.

:func:`wait_exit` waits for a process this one did not start (its exit status is not ours to
read): through ``pidfd_open`` where the kernel has it (the descriptor pins the process, so no
recycling race), otherwise by polling :func:`same_process`.
"""

from __future__ import annotations

import os
import select
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessId:
    pid: int
    start: int  # clock ticks after boot
    boot: str  # /proc/sys/kernel/random/boot_id

    def started_at(self) -> float | None:
        """Wall-clock start time (seconds since the epoch), None when /proc/stat has no btime."""
        try:
            btime = next(
                int(line.split()[1])
                for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime ")
            )
        except (OSError, StopIteration, ValueError):
            return None
        return btime + self.start / os.sysconf("SC_CLK_TCK")


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start ticks) of ``pid`` from /proc, None when gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def identity(pid: int) -> ProcessId | None:
    """The identity of the running process ``pid``; None when it is gone, a zombie or /proc is absent."""
    stat, boot = _stat(pid), boot_id()
    if stat is None or boot is None or stat[0] == "Z":
        return None
    return ProcessId(pid, stat[1], boot)


def from_record(pid: object, start: object, boot: object) -> ProcessId | None:
    """A :class:`ProcessId` from fields of a JSON record; None when any is missing or malformed."""
    if isinstance(pid, int) and pid > 0 and isinstance(start, int) and isinstance(boot, str) and boot:
        return ProcessId(pid, start, boot)
    return None


def same_process(pid: ProcessId) -> bool:
    """True while the very process ``pid`` names runs (not a recycled pid, not a zombie)."""
    return identity(pid.pid) == pid


def wait_exit(pid: ProcessId, poll: float = 0.1) -> None:
    """Block until the process is gone (returns at once when it already is)."""
    fd = _pidfd(pid)
    if fd is None:
        while same_process(pid):
            time.sleep(poll)
        return
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not poller.poll(1000) and same_process(pid):
            pass
    finally:
        os.close(fd)


def _pidfd(pid: ProcessId) -> int | None:
    """A pidfd on the process, opened before checking its identity (so it cannot be another one)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd = opener(pid.pid)
    except OSError:
        return None
    if not same_process(pid):
        os.close(fd)
        return None
    return fd
