"""``fleet run``: start the job, resume it from the newest checkpoint, restart it on crashes.

Promises:
- Idempotent: one wrapper per lock file on a node. A second start while the first wrapper
  lives returns ``already-running`` at once (exit 0) and touches nothing.
- Adoption: when the wrapper is gone (killed) but its job still runs, a second start of the same
  command adopts the job: it verifies the job is the recorded process (pid, start time and boot
  id; a recycled pid is never adopted), takes the ``.adopt`` lock (so of two concurrent reruns
  exactly one adopts; the other returns ``already-running``), rewrites the record with its own
  pid, delivers notices to the job exactly as the original wrapper would and ends when the job
  ends. The job is not its child, so its exit code is unknown: the run ends ``interrupted`` after
  a final notice, ``stopped`` after SIGTERM/SIGINT (forwarded to the job), and otherwise
  ``exited`` (exit 0, "code unknown"); nothing restarts an adopted job after it ends. A job that
  cannot be proved to be the recorded one is reported ``unwatched`` (exit 1) and never signalled;
  a lock held by a leftover process while the recorded job is gone is reported ``stale`` (exit 1).
- Every start exports ``SPOTFLEET_CHECKPOINT_URI`` and ``SPOTFLEET_RESUME_STEP`` (the step of the
  newest checkpoint that passes its checksum, the one the job's loader resumes from; 0 without one) so the job resumes where the last run committed. When
  the storage cannot be read at a restart the job is not started (it would be told step 0): the
  read is retried with the restart backoff and counts as a restart.
- A crash (non-zero exit, death by a signal such as kill -9) restarts the job after an
  exponential backoff, at most ``max_restarts`` times in a row; exit 0 ends the run. A job that
  ran ``healthy_after`` seconds or longer before it crashed was healthy: the count and the backoff
  start again from zero (as systemd's ``StartLimitIntervalSec`` forgets old starts), so a
  week-long job survives any number of crashes spread over the week, while one that crashes
  at once ``max_restarts + 1`` times in a row is given up. ``restarts`` in the result counts all.
- The notice watcher runs alongside in a thread: on a notice it signals the current job and
  waits for its final checkpoint (:func:`fleet.agent.runner.respond`). After a final notice the
  job is not restarted on this node (the node is going; the next node resumes). After advice
  (AWS rebalance) the job is restarted at once, resuming from the checkpoint it just wrote.
- SIGTERM/SIGINT to the wrapper are forwarded to the job; the wrapper then waits for it and
  stops without restarting.
- The node log's uploader (``log_shipper``, :mod:`fleet.agent.logship`) is started by the wrapper
  that runs or adopts the job, never by a start that finds one running; the caller closes it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from fleet.agent.adopt import Finding, classify
from fleet.agent.checkpoints import CheckpointProbe
from fleet.agent.hooks import SignalHook
from fleet.agent.lock import AdoptLock, RunLock, own_identity
from fleet.agent.logship import LogShipper
from fleet.agent.notice import Notice, PollingWatcher, WatcherConfigError
from fleet.agent.procid import ProcessId, identity, same_process, wait_exit
from fleet.agent.runner import Outcome, Reporter, respond
from fleet.errors import FleetError

log = logging.getLogger("fleet.agent")


@dataclass
class RunOptions:
    argv: list[str]
    lock_path: Path
    probe: CheckpointProbe | None = None
    watcher: PollingWatcher | None = None
    hook_signal: signal.Signals = signal.SIGTERM
    max_restarts: int = 5
    backoff: float = 1.0
    backoff_max: float = 60.0
    healthy_after: float = 600.0
    margin: float = 5.0
    reporter: Reporter | None = None
    log_shipper: LogShipper | None = None


@dataclass
class RunResult:
    """How the run ended: ``finished``, ``interrupted``, ``failed``, ``stopped``, ``exited`` (an
    adopted job ended, code unknown), ``already-running``, ``unwatched`` or ``stale``.
    ``adopted`` describes the job this run adopted ({} when it started its own)."""

    status: str
    exit_code: int
    message: str
    starts: int = 0
    restarts: int = 0
    resume_steps: list[int] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    holder: dict = field(default_factory=dict)
    adopted: dict = field(default_factory=dict)


def supervise(opts: RunOptions, *, handle_signals: bool = True) -> RunResult:
    """Run ``opts.argv`` under the lock until it finishes, is interrupted or fails for good; adopt
    the job instead when the lock is held by a job whose wrapper is gone."""
    lock = RunLock(opts.lock_path)
    if lock.acquire(opts.argv):
        try:
            return _Supervisor(opts, lock).run(handle_signals)
        finally:
            lock.release()
    adopt = AdoptLock(opts.lock_path)
    if not adopt.acquire():
        holder = lock.holder()
        finding = classify(holder, opts.argv)
        if finding.kind == "watched":
            return _busy(opts.lock_path, holder, finding)
        return _watched_by_adopter(opts.lock_path, holder, adopt.holder_pid())
    try:
        finding = classify(lock.holder(), opts.argv)
        if finding.kind in ("unverifiable", "stale"):
            time.sleep(0.2)  # a wrapper that just took the lock may not have written the record yet
            finding = classify(lock.holder(), opts.argv)
        if finding.kind != "orphan":
            return _busy(opts.lock_path, lock.holder(), finding)
        assert finding.job is not None
        lock.take_over(**own_identity(), adopted_from=finding.wrapper_pid, adopted_at=time.time())
        adopted = _adoption(finding)
        log.warning("%s", adopted["line"])
        return _Supervisor(opts, lock, adopted=finding.job, adoption=adopted).run(handle_signals)
    finally:
        adopt.release()


def _adoption(finding: Finding) -> dict:
    """The JSON (and the one line) describing an adoption."""
    assert finding.job is not None
    started = finding.job.started_at()
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)) if started is not None else "an unknown time"
    line = f"adopted job pid {finding.job.pid} started at {when} (its wrapper pid {finding.wrapper_pid} is gone)"
    return {"job_pid": finding.job.pid, "job_started_at": started, "wrapper_pid": finding.wrapper_pid, "line": line}


class _Supervisor:
    def __init__(
        self, opts: RunOptions, lock: RunLock, *, adopted: ProcessId | None = None, adoption: dict | None = None
    ):
        self.opts = opts
        self.lock = lock
        self.adopted = adopted  # a job started by a wrapper that is gone
        self.adoption = adoption or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.wake = threading.Event()  # a notice or a stop request interrupts waits
        self.stop_agent = threading.Event()
        self.stop_signal: int | None = None
        self.notice: Notice | None = None  # set by the agent thread the moment a notice arrives
        self.responded = threading.Event()  # the agent finished responding to ``notice``
        self.outcomes: list[Outcome] = []

    # ---- the agent thread ----------------------------------------------------------------------
    def _job_pid(self) -> int | None:
        if self.adopted is not None:
            return self.adopted.pid if same_process(self.adopted) else None
        proc = self.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _exit_status(self, pid: int) -> int | None:
        proc = self.proc
        return proc.returncode if proc is not None and proc.pid == pid else None

    def _agent(self) -> None:
        watcher = self.opts.watcher
        assert watcher is not None
        hook = SignalHook(self.opts.hook_signal, self._job_pid, self._exit_status)
        while not self.stop_agent.is_set():
            try:
                notice = watcher.wait_for_notice(self.stop_agent)
            except WatcherConfigError as err:
                log.error("notice watcher stopped: %s (the job keeps running unwatched)", err)
                return
            if notice is None:
                return
            self.responded.clear()
            self.notice = notice
            self.wake.set()
            outcome = respond(
                notice,
                hook,
                probe=self.opts.probe,
                margin=self.opts.margin,
                watcher=watcher,
                reporter=self.opts.reporter,
            )
            log.info("%s", outcome.summary())
            self.outcomes.append(outcome)
            self.responded.set()
            if notice.final:
                return

    # ---- the main loop -------------------------------------------------------------------------
    def run(self, handle_signals: bool) -> RunResult:
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, self._on_signal)
        if self.opts.watcher is not None:
            threading.Thread(target=self._agent, name="fleet-agent", daemon=True).start()
        if self.opts.log_shipper is not None:
            self.opts.log_shipper.start()
        try:
            return self._watch_adopted() if self.adopted is not None else self._loop()
        finally:
            self.stop_agent.set()

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stop_signal = signum
        self.wake.set()
        pid = self._job_pid()
        if pid is not None:
            os.kill(pid, signum)

    def _loop(self) -> RunResult:
        starts = restarts = 0
        streak = 0  # restarts since the job last ran healthy_after seconds
        steps: list[int] = []

        def result(status: str, code: int, message: str) -> RunResult:
            return RunResult(status, code, message, starts, restarts, steps, self.outcomes)

        def ending(rc: int | None) -> tuple[RunResult | None, Notice | None]:
            """(result, notice): a result when a stop request or a final notice ends the run here."""
            if self.stop_signal is not None:
                after = f"; job exited with {_describe(rc)}" if rc is not None else " before a restart"
                return result("stopped", 0, f"stopped by {signal.Signals(self.stop_signal).name}{after}"), None
            notice = self._settle_notice()
            if notice is not None and notice.final:
                last = self.outcomes[-1].summary() if self.outcomes else f"{notice.cloud} {notice.kind} notice"
                return result("interrupted", 0, f"interrupted: {last}"), notice
            return None, notice

        while True:
            try:
                step = self.opts.probe.latest_step() if self.opts.probe is not None else 0
            except FleetError as err:  # never start the job with a wrong resume step
                restarts += 1
                streak += 1
                if streak > self.opts.max_restarts:
                    return result("failed", 1, f"{err}; giving up after {streak - 1} restart(s)")
                delay = min(self.opts.backoff * 2 ** (streak - 1), self.opts.backoff_max)
                log.warning(
                    "%s; not starting the job; trying again in %.1f s (%d/%d)",
                    err,
                    delay,
                    streak,
                    self.opts.max_restarts,
                )
                self.wake.wait(delay)
                end, _ = ending(None)
                if end is not None:
                    return end
                continue
            steps.append(step)
            starts += 1
            began = time.monotonic()
            rc = self._run_job(step)
            if streak and time.monotonic() - began >= self.opts.healthy_after:
                log.info(
                    "the job ran %.0f s (healthy): the restart count and backoff start again", time.monotonic() - began
                )
                streak = 0
            end, advice = ending(rc)
            if end is not None:
                return end
            if advice is not None:
                log.info("restarting the job after the %s notice", advice.kind)
                continue
            if rc == 0:
                return result("finished", 0, f"job finished after {starts} start(s)")
            restarts += 1
            streak += 1
            if streak > self.opts.max_restarts:
                times = f"{streak} time{'s' if streak != 1 else ''}"
                return result(
                    "failed",
                    rc if rc > 0 else 128 - rc,
                    f"job failed {times} in a row, last with {_describe(rc)}; giving up",
                )
            delay = min(self.opts.backoff * 2 ** (streak - 1), self.opts.backoff_max)
            log.warning(
                "job exited with %s; restart %d/%d in %.1f s", _describe(rc), streak, self.opts.max_restarts, delay
            )
            self.wake.wait(delay)
            end, _ = ending(None)
            if end is not None:
                return end

    def _watch_adopted(self) -> RunResult:
        """Wait for the adopted job to end (it is not our child: its exit code is unknown)."""
        assert self.adopted is not None
        pid = self.adopted.pid
        wait_exit(self.adopted)

        def result(status: str, message: str) -> RunResult:
            return RunResult(
                status,
                0,
                message,
                outcomes=self.outcomes,
                adopted={k: v for k, v in self.adoption.items() if k != "line"},
            )

        if self.stop_signal is not None:
            return result(
                "stopped",
                f"stopped by {signal.Signals(self.stop_signal).name}; adopted job pid {pid} exited, code unknown",
            )
        notice = self._settle_notice()
        if notice is not None and notice.final:
            last = self.outcomes[-1].summary() if self.outcomes else f"{notice.cloud} {notice.kind} notice"
            return result("interrupted", f"interrupted: {last}")
        return result(
            "exited",
            f"adopted job pid {pid} exited, code unknown (only the wrapper that started it "
            "could see it); if it did not finish, run this command again to resume it from "
            "the newest checkpoint",
        )

    def _settle_notice(self) -> Notice | None:
        """Wait until the agent has responded to the current notice; return it (advice is consumed)."""
        notice = self.notice
        if notice is not None:
            self.responded.wait(max(0.0, notice.seconds_left()) + 5.0)
            if not notice.final:
                self.notice = None
        self.wake.clear()
        return notice

    def _run_job(self, step: int) -> int:
        env = {**os.environ, "SPOTFLEET_RESUME_STEP": str(step)}
        if self.opts.probe is not None:
            env["SPOTFLEET_CHECKPOINT_URI"] = self.opts.probe.uri
        log.info("starting %s (resume step %d)", " ".join(self.opts.argv), step)
        assert self.lock.fd is not None
        # same process group as the wrapper: whoever kills the node's group kills the job too
        self.proc = subprocess.Popen(self.opts.argv, env=env, pass_fds=(self.lock.fd,))
        job = identity(self.proc.pid)
        self.lock.update(
            job_pid=self.proc.pid, job_start=job.start if job else None, job_boot=job.boot if job else None
        )
        return self.proc.wait()


def _busy(lock_path: Path, holder: dict, finding: Finding) -> RunResult:
    """The result for a lock held by a live wrapper, a job nothing proves is ours, or a leftover."""
    wrapper, job = finding.wrapper_pid, finding.job_pid
    if finding.kind == "unverifiable":
        return RunResult(
            "unwatched",
            1,
            (
                f"job pid {job} is running UNWATCHED: its wrapper (pid {wrapper}) is gone, and the run record "
                f"cannot prove pid {job} is the job this command started (a different command under this name, or a "
                f"record without its start time), so it is not adopted; stop it (kill {job}) and run this command "
                f"again, or watch it with `fleet agent --pid {job}`"
            ),
            holder=holder,
        )
    if finding.kind == "stale":
        return RunResult(
            "stale",
            1,
            (
                f"{lock_path} is held, but its job (pid {job or '-'}) and wrapper (pid {wrapper or '-'}) are gone: a "
                f"process the job started still holds the lock; find it with `fuser -v {lock_path}`, stop it and run "
                "this command again"
            ),
            holder=holder,
        )
    who = f"wrapper pid {wrapper or '?'}, job pid {job or '-'}"
    return RunResult("already-running", 0, f"already running under {lock_path} ({who}); nothing to do", holder=holder)


def _watched_by_adopter(lock_path: Path, holder: dict, adopter: int | None) -> RunResult:
    """Another rerun holds the adopt lock: it watches (or is adopting) the job."""
    job = holder.get("job_pid")
    return RunResult(
        "already-running",
        0,
        (
            f"already running under {lock_path} (job pid {job or '-'}, adopted by wrapper pid {adopter or '?'}); "
            "nothing to do"
        ),
        holder=holder,
    )


def _describe(rc: int) -> str:
    if rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"exit code {rc}"
