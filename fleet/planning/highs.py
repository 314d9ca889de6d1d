"""Calls into HiGHS (``highspy``, its own bindings), keeping its stray C-level output off stdout.

The planner talks to HiGHS directly: ``solve_milp`` and ``solve_lp`` take a program in
row-wise sparse form (``Program``) and return plain numpy results. Going through
``scipy.optimize`` cost about half a second of start-up per ``fleet plan`` (its import) and
a validation pass per solve; ``highspy`` imports in a fraction of that.

Some HiGHS releases print a debug line
(``HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();``) straight to
the C ``stdout`` on some MIPs even when output is off (ERGO-Code/HiGHS#2783). That would
corrupt ``--json`` output, so every solve moves file descriptor 1 to stderr for its
duration and flushes C stdio before moving it back. Solves are serialised by a lock;
another thread writing to stdout during a solve lands on stderr.

``milp`` keeps the ``scipy.optimize.milp`` signature (with the same guard) for callers that
build scipy programs; it imports scipy only when called.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

_lock = threading.Lock()
try:
    _libc: Any = ctypes.CDLL(None)
    _libc.fflush.argtypes = [ctypes.c_void_p]
except (OSError, AttributeError):  # no C runtime to flush (unusual platforms)
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
        except OSError:  # no stdout at all
            yield
            return
        try:
            os.dup2(2, 1)
            yield
        finally:
            _flush_c_stdio()
            os.dup2(saved, 1)
            os.close(saved)


@dataclass
class Program:
    """``min c.x`` s.t. ``row_lb <= A x <= row_ub``, ``lb <= x <= ub``; ``A`` row-wise
    (``start``, ``index``, ``value`` as in CSR); ``integrality`` 1 for integer columns."""

    c: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    integrality: np.ndarray
    start: np.ndarray
    index: np.ndarray
    value: np.ndarray
    row_lb: np.ndarray
    row_ub: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.row_lb)


@dataclass
class MilpResult:
    x: np.ndarray | None  # None: infeasible, or no solution found in time
    proven: bool  # optimality proven (False: a limit was hit first)


def _highs(options: dict[str, Any]):
    import highspy  # imported on first solve: `fleet --help` and `status` never load it

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    for key, value in options.items():
        h.setOptionValue(key, value)
    return h, highspy


def _pass(h, hs, prog: Program, ub: np.ndarray, integer: bool) -> None:
    inf = hs.kHighsInf
    h.passModel(
        len(prog.c),
        prog.rows,
        len(prog.value),
        int(hs.MatrixFormat.kRowwise),
        int(hs.ObjSense.kMinimize),
        0.0,
        np.ascontiguousarray(prog.c, float),
        np.ascontiguousarray(prog.lb, float),
        np.ascontiguousarray(np.where(np.isinf(ub), inf, ub), float),
        np.ascontiguousarray(np.where(np.isinf(prog.row_lb), -inf, prog.row_lb), float),
        np.ascontiguousarray(np.where(np.isinf(prog.row_ub), inf, prog.row_ub), float),
        np.ascontiguousarray(prog.start, np.int32),
        np.ascontiguousarray(prog.index, np.int32),
        np.ascontiguousarray(prog.value, float),
        np.ascontiguousarray(prog.integrality if integer else np.zeros(len(prog.c)), np.int32),
    )


def solve_milp(prog: Program, ub: np.ndarray, options: dict[str, Any], cutoff: float = np.inf) -> MilpResult:
    """Solves ``prog`` with column upper bounds ``ub``; ``options`` are HiGHS options. With a
    finite ``cutoff`` only solutions of objective below it matter: HiGHS prunes every branch
    whose bound reaches it (a hair above, so no solution below it is lost to tolerances) and
    may answer none."""
    h, hs = _highs(options)
    if np.isfinite(cutoff):
        h.setOptionValue("objective_bound", float(cutoff + 1e-7 * max(1.0, abs(cutoff))))
    _pass(h, hs, prog, ub, integer=True)
    with _stdout_to_stderr():
        h.run()
    status = h.getModelStatus()
    found = h.getInfo().primal_solution_status == hs.SolutionStatus.kSolutionStatusFeasible
    if status == hs.HighsModelStatus.kOptimal:
        return MilpResult(np.array(h.getSolution().col_value), True)
    limits = (hs.HighsModelStatus.kTimeLimit, hs.HighsModelStatus.kIterationLimit, hs.HighsModelStatus.kSolutionLimit)
    if status in limits and found:
        return MilpResult(np.array(h.getSolution().col_value), False)
    return MilpResult(None, False)


def solve_lp(prog: Program, row_duals: bool = False) -> tuple | None:
    """The LP relaxation of ``prog`` (simplex, no presolve: presolve costs 20x the solve on the
    planner's LPs): its optimum and the columns' reduced costs (and with ``row_duals`` the
    rows' duals, HiGHS's signs: <= 0 on a binding upper bound of a minimisation), ``None`` if
    infeasible, and ``(-inf, zeros...)`` when it has no finite optimum."""
    h, hs = _highs({"presolve": "off", "solver": "simplex"})
    _pass(h, hs, prog, prog.ub, integer=False)
    with _stdout_to_stderr():
        h.run()
    status = h.getModelStatus()
    if status == hs.HighsModelStatus.kInfeasible:
        return None
    if status != hs.HighsModelStatus.kOptimal:
        return (-np.inf, np.zeros(len(prog.c))) + ((np.zeros(prog.rows),) if row_duals else ())
    solution = h.getSolution()
    out = (float(h.getInfo().objective_function_value), np.array(solution.col_dual))
    return out + (np.array(solution.row_dual),) if row_duals else out


def milp(*args: Any, **kwargs: Any) -> Any:
    """``scipy.optimize.milp`` with HiGHS's stray prints sent to stderr."""
    from scipy.optimize import milp as _milp

    with _stdout_to_stderr():
        return _milp(*args, **kwargs)
