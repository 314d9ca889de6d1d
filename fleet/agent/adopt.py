"""What a rerun of ``fleet run`` finds in the run record when it cannot take the lock.

:func:`classify` reads the record (:mod:`fleet.agent.lock`) and names the situation:

- ``watched``: the recorded wrapper is alive (the very process, by pid and start time), or the
  record names no wrapper yet (one is starting);
- ``orphan``: the wrapper is gone and the recorded job is provably the same process still running
  the same command: a rerun may adopt it;
- ``unverifiable``: the wrapper is gone and the job pid is alive, but the record lacks the job's
  identity (written by an older version, or no /proc) or names another command: it may be the
  job, but nothing proves it, so it is reported, never signalled;
- ``stale``: the wrapper is gone and the recorded job is not running (its pid is dead or now
  names another process), yet something holds the lock: a process the job started, left behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleet.agent.hooks import pid_alive
from fleet.agent.procid import ProcessId, from_record, same_process


@dataclass(frozen=True)
class Finding:
    kind: str  # watched | orphan | unverifiable | stale
    wrapper_pid: int | None
    job_pid: int | None
    job: ProcessId | None = None  # set for ``orphan``


def classify(holder: dict[str, Any], argv: list[str]) -> Finding:
    wrapper_pid, job_pid = holder.get("pid"), holder.get("job_pid")
    wrapper_pid = wrapper_pid if isinstance(wrapper_pid, int) else None
    job_pid = job_pid if isinstance(job_pid, int) else None
    if wrapper_pid is None or _wrapper_alive(holder, wrapper_pid):
        return Finding("watched", wrapper_pid, job_pid)
    job = from_record(job_pid, holder.get("job_start"), holder.get("job_boot"))
    if job is not None and same_process(job):
        if holder.get("argv") == argv:
            return Finding("orphan", wrapper_pid, job_pid, job)
        return Finding("unverifiable", wrapper_pid, job_pid)
    if job is None and job_pid is not None and pid_alive(job_pid):
        return Finding("unverifiable", wrapper_pid, job_pid)
    return Finding("stale", wrapper_pid, job_pid)


def _wrapper_alive(holder: dict[str, Any], pid: int) -> bool:
    wrapper = from_record(pid, holder.get("start"), holder.get("boot"))
    return same_process(wrapper) if wrapper is not None else pid_alive(pid)
