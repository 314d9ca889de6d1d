"""``fleet run``: start the job, resume it from the newest checkpoint, restart it on crashes.

Promises:
- Idempotent: one wrapper per lock file on a node. A second start while the first wrapper
  lives returns ``already-running`` at once (exit 0) and touches nothing. When the wrapper is
  gone but its job still runs (the wrapper was killed), nothing restarts that job or delivers
  notices to it: a second start returns ``unwatched`` (exit 1), naming the job and how to fix it.
- Every start exports ``SPOTFLEET_CHECKPOINT_URI`` and ``SPOTFLEET_RESUME_STEP`` (the newest
  valid checkpoint's step, 0 without one) so the job resumes where the last run committed.
- A crash (non-zero exit, death by a signal such as kill -9) restarts the job after an
  exponential backoff, at most ``max_restarts`` times; exit 0 ends the run.
- The notice watcher runs alongside in a thread: on a notice it signals the current job and
  waits for its final checkpoint (:func:`fleet.agent.runner.respond`). After a final notice the
  job is not restarted on this node (the node is going; the next node resumes). After advice
  (AWS rebalance) the job is restarted at once, resuming from the checkpoint it just wrote.
- SIGTERM/SIGINT to the wrapper are forwarded to the job; the wrapper then waits for it and
  stops without restarting.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from fleet.agent.checkpoints import CheckpointProbe
from fleet.agent.hooks import SignalHook, pid_alive
from fleet.agent.lock import RunLock
from fleet.agent.notice import Notice, PollingWatcher, WatcherConfigError
from fleet.agent.runner import Outcome, Reporter, respond

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
    margin: float = 5.0
    reporter: Reporter | None = None


@dataclass
class RunResult:
    """How the run ended: ``finished``, ``interrupted``, ``failed``, ``stopped``, ``already-running``
    or ``unwatched``."""

    status: str
    exit_code: int
    message: str
    starts: int = 0
    restarts: int = 0
    resume_steps: list[int] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    holder: dict = field(default_factory=dict)


def supervise(opts: RunOptions, *, handle_signals: bool = True) -> RunResult:
    """Run ``opts.argv`` under the lock until it finishes, is interrupted or fails for good."""
    lock = RunLock(opts.lock_path)
    if not lock.acquire(opts.argv):
        return _busy(opts.lock_path, lock.holder())
    try:
        return _Supervisor(opts, lock).run(handle_signals)
    finally:
        lock.release()


class _Supervisor:
    def __init__(self, opts: RunOptions, lock: RunLock):
        self.opts = opts
        self.lock = lock
        self.proc: subprocess.Popen[bytes] | None = None
        self.wake = threading.Event()          # a notice or a stop request interrupts waits
        self.stop_agent = threading.Event()
        self.stop_signal: int | None = None
        self.notice: Notice | None = None      # set by the agent thread the moment a notice arrives
        self.responded = threading.Event()     # the agent finished responding to ``notice``
        self.outcomes: list[Outcome] = []

    # ---- the agent thread ----------------------------------------------------------------------
    def _job_pid(self) -> int | None:
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
            outcome = respond(notice, hook, probe=self.opts.probe, margin=self.opts.margin, watcher=watcher,
                              reporter=self.opts.reporter)
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
        try:
            return self._loop()
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
            step = self.opts.probe.latest_step() if self.opts.probe is not None else 0
            steps.append(step)
            starts += 1
            rc = self._run_job(step)
            end, advice = ending(rc)
            if end is not None:
                return end
            if advice is not None:
                log.info("restarting the job after the %s notice", advice.kind)
                continue
            if rc == 0:
                return result("finished", 0, f"job finished after {starts} start(s)")
            restarts += 1
            if restarts > self.opts.max_restarts:
                times = f"{restarts} time{'s' if restarts != 1 else ''}"
                return result("failed", rc if rc > 0 else 128 - rc,
                              f"job failed {times}, last with {_describe(rc)}; giving up")
            delay = min(self.opts.backoff * 2 ** (restarts - 1), self.opts.backoff_max)
            log.warning("job exited with %s; restart %d/%d in %.1f s", _describe(rc), restarts,
                        self.opts.max_restarts, delay)
            self.wake.wait(delay)
            end, _ = ending(None)
            if end is not None:
                return end

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
        self.lock.update(job_pid=self.proc.pid)
        return self.proc.wait()


def _busy(lock_path: Path, holder: dict) -> RunResult:
    """The result for a lock someone else holds: a live wrapper, or a job whose wrapper is gone."""
    wrapper, job = holder.get("pid"), holder.get("job_pid")
    if isinstance(wrapper, int) and isinstance(job, int) and not pid_alive(wrapper) and pid_alive(job):
        return RunResult("unwatched", 1, (
            f"job pid {job} is running UNWATCHED: its wrapper (pid {wrapper}) is gone, so nothing restarts it "
            f"after a crash or passes interruption notices to it; stop it (kill {job}) and run this command "
            f"again, or watch it with `fleet agent --pid {job}`"), holder=holder)
    who = f"wrapper pid {wrapper or '?'}, job pid {job or '-'}"
    return RunResult("already-running", 0, f"already running under {lock_path} ({who}); nothing to do",
                     holder=holder)


def _describe(rc: int) -> str:
    if rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"exit code {rc}"
