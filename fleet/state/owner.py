"""Who holds a fleet lock, and whether that process still lives.

An owner string is ``host:pid:start`` where ``start`` is the process start time from
``/proc`` (empty where unavailable), so a recycled pid is not mistaken for the holder.
"""

from __future__ import annotations

import os
import socket
from functools import lru_cache


def _stat(pid: int) -> list[str]:
    """Fields 3.. of /proc/<pid>/stat (state first), or [] where unavailable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode(errors="replace")
    except OSError:
        return []
    # the command name (field 2) may contain spaces and parentheses: split after the last ')'
    return raw.rsplit(")", 1)[-1].split()


def _start_time(pid: int) -> str:
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else ""


@lru_cache(maxsize=1)
def host() -> str:
    return socket.gethostname()


def current_owner() -> tuple[str, int, str]:
    """(owner string, pid, host) of this process."""
    pid = os.getpid()
    return f"{host()}:{pid}:{_start_time(pid)}", pid, host()


def is_alive(owner: str) -> bool | None:
    """True/False for an owner on this host; None when it runs on another host (unknown)."""
    owner_host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if owner_host != host():
        return None
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        pass  # exists, owned by another user
    fields = _stat(pid)
    if fields and fields[0] in ("Z", "X"):   # killed, not yet reaped by its parent
        return False
    return not start or len(fields) <= 19 or fields[19] == start
