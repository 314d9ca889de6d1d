"""What the agent does the moment a notice arrives: signal the job, or run a command.

A hook's :meth:`fire` must be quick (it is what the notice->hook latency measures): it sends the
signal or starts the command and returns. :meth:`running` then says whether what it addressed
is still busy (the signalled process alive / the command not finished) and ``expect_exit``
whether it is expected to finish, so the agent can wait for the job's final save. Nothing here
raises for a process that is already gone: that is reported in the :class:`HookResult`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from fleet.errors import FleetError

#: Signals after which the job is expected to exit (SIGUSR1 conventionally means "save and go on").
TERMINATING = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}


@dataclass(frozen=True)
class HookResult:
    ok: bool
    fired_at: float
    detail: str


class Hook(Protocol):
    #: True when the job is expected to finish after the hook (a terminating signal, a command).
    expect_exit: bool

    def fire(self) -> HookResult: ...
    def running(self) -> bool: ...
    def target_gone(self) -> bool: ...
    def describe(self) -> str: ...

    def job_exit_status(self) -> int | None:
        """The signalled job's exit status once known (only for a job this process started)."""
        ...


def parse_signal(name: str) -> signal.Signals:
    """``SIGTERM``/``TERM``/``15`` -> the signal; FleetError naming the accepted forms otherwise."""
    text = name.strip().upper()
    try:
        if text.isdigit():
            return signal.Signals(int(text))
        return signal.Signals[text if text.startswith("SIG") else f"SIG{text}"]
    except (KeyError, ValueError):
        raise FleetError(f"unknown signal {name!r}; use a name such as SIGTERM or SIGUSR1") from None


class SignalHook:
    """Sends ``sig`` to the process ``pid()`` returns (a callable: the job may be restarted).

    ``exit_status(pid)``, when given, reports the exit status of a job this process started
    (None while it runs); a process started elsewhere has no status to report.
    """

    def __init__(
        self,
        sig: signal.Signals,
        pid: int | Callable[[], int | None],
        exit_status: Callable[[int], int | None] | None = None,
    ):
        self.sig = sig
        self._pid = pid if callable(pid) else (lambda: pid)
        self._exit_status = exit_status
        self._target: int | None = None
        self.expect_exit = sig in TERMINATING

    def describe(self) -> str:
        return f"{self.sig.name} to pid {self._target or self._pid()}"

    def fire(self) -> HookResult:
        self._target = self._pid()
        if self._target is None:
            return HookResult(False, time.time(), "no job process to signal")
        try:
            os.kill(self._target, self.sig)
        except ProcessLookupError:
            return HookResult(False, time.time(), f"pid {self._target} is not running")
        except PermissionError:
            return HookResult(False, time.time(), f"not allowed to signal pid {self._target}")
        return HookResult(True, time.time(), f"{self.sig.name} sent to pid {self._target}")

    def running(self) -> bool:
        """True while the signalled process lives."""
        return self._target is not None and pid_alive(self._target)

    def target_gone(self) -> bool:
        """True once the signalled process has exited (nothing more will be saved by it)."""
        return not self.running()

    def job_exit_status(self) -> int | None:
        if self._target is None or self._exit_status is None:
            return None
        return self._exit_status(self._target)


class CommandHook:
    """Runs ``command`` through the shell (e.g. a drain); the agent waits for it to exit."""

    expect_exit = True

    def __init__(self, command: str):
        self.command = command
        self.proc: subprocess.Popen[bytes] | None = None

    def describe(self) -> str:
        return f"command {self.command!r}"

    def fire(self) -> HookResult:
        try:
            self.proc = subprocess.Popen(self.command, shell=True, stdin=subprocess.DEVNULL)
        except OSError as err:
            return HookResult(False, time.time(), f"hook command failed to start: {err}")
        return HookResult(True, time.time(), f"started {self.command!r} (pid {self.proc.pid})")

    def running(self) -> bool:
        """True while the hook command runs."""
        return self.proc is not None and self.proc.poll() is None

    def target_gone(self) -> bool:
        """Never known: the command may have asked a job elsewhere to save."""
        return False

    def job_exit_status(self) -> int | None:
        """Unknown: the command's own status says nothing about the job's checkpoint."""
        return None


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True
