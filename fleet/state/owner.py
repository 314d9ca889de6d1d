"""Who holds a fleet lock, and whether that process can be judged alive from here.

An owner string is ``host:pid:start:scope:token``: ``start`` is the process start time from
``/proc`` (so a recycled pid is not mistaken for the holder), ``scope`` names the kernel boot
and PID namespace the pid belongs to, and ``token`` is random per process. A pid means
something only inside its own PID namespace: a ``fleet rebalance`` in a container that shares
the state file and the hostname has pids this namespace's ``/proc`` knows nothing of (or knows
as someone else). So liveness is judged only for an owner in this very scope; any other
holder (another host, another namespace, an owner written without a scope) is alive for as long
as its lease, renewed by its heartbeat, has not expired.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from functools import lru_cache

_TOKENS: dict[int, str] = {}


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


def scope() -> str:
    """``<boot id>/<pid namespace inode>`` of this process, or "" where either is unknown (then
    no holder's liveness is judged from here)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
        namespace = re.fullmatch(r"pid:\[(\d+)\]", os.readlink("/proc/self/ns/pid"))
    except OSError:
        return ""
    return f"{boot}/{namespace.group(1)}" if boot and namespace else ""


def _token() -> str:
    """A random token for this process (a forked child draws its own)."""
    return _TOKENS.setdefault(os.getpid(), secrets.token_hex(8))


def current_owner() -> tuple[str, int, str]:
    """(owner string, pid, host) of this process."""
    pid = os.getpid()
    return f"{host()}:{pid}:{_start_time(pid)}:{scope()}:{_token()}", pid, host()


def is_alive(owner: str) -> bool | None:
    """True/False for an owner in this process's scope (same host, boot and PID namespace);
    None when it cannot be judged from here (its lease decides)."""
    parts = owner.split(":")
    if len(parts) != 5 or parts[0] != host() or not parts[3] or parts[3] != scope():
        return None
    _, pid_text, start, _, _ = parts
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        pass  # exists, owned by another user
    fields = _stat(pid)
    if fields and fields[0] in ("Z", "X"):  # killed, not yet reaped by its parent
        return False
    return not start or len(fields) <= 19 or fields[19] == start
