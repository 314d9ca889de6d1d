"""Calls into HiGHS through scipy, keeping its stray C-level output off stdout.

HiGHS 1.12 (the version scipy bundles) prints a debug line
(``HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();``) straight to
the C ``stdout`` on some MIPs even when output is off (ERGO-Code/HiGHS#2783, fixed in later
HiGHS). That would corrupt ``--json`` output, so ``milp`` moves file descriptor 1 to
stderr for the duration of a solve and flushes C stdio before moving it back. Solves are
serialised by a lock; another thread writing to stdout during a solve lands on stderr.
"""

from __future__ import annotations

import ctypes
import os
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from scipy.optimize import milp as _milp

_lock = threading.Lock()
try:
    _libc: Any = ctypes.CDLL(None)
    _libc.fflush.argtypes = [ctypes.c_void_p]
except (OSError, AttributeError):     # no C runtime to flush (unusual platforms)
    _libc = None


def _flush_c_stdio() -> None:
    if _libc is not None:
        _libc.fflush(None)


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    with _lock:
        _flush_c_stdio()
        try:
            saved = os.dup(1)
        except OSError:          # no stdout at all
            yield
            return
        try:
            os.dup2(2, 1)
            yield
        finally:
            _flush_c_stdio()
            os.dup2(saved, 1)
            os.close(saved)


def milp(*args: Any, **kwargs: Any) -> Any:
    """``scipy.optimize.milp`` with HiGHS's stray prints sent to stderr."""
    with _stdout_to_stderr():
        return _milp(*args, **kwargs)
