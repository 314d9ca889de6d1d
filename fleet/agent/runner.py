"""The agent's response to a notice: hook, wait for the final checkpoint, acknowledge, report.

:func:`respond` is shared by ``fleet agent`` and ``fleet run``. It promises to return by
``notice.deadline - margin`` (plus one poll) whatever the job or the storage does, never to
raise for a job or storage failure, and to describe what happened in an :class:`Outcome`.

"Final checkpoint committed" means the newest valid checkpoint was committed at or after the
moment the notice was seen (the writer's clock; the job runs on this node), or, for a job this
process started (``fleet run``), that the job exited 0 after the signal without needing a newer
one (its newest step was already saved). The agent also waits for a job it told to stop
(terminating signal or command hook) to finish, so an acknowledgement never cuts a save short;
it stops waiting ``settle`` seconds after the signalled job exited without committing anything.

The margin scales with the notice window: it is at most :data:`MARGIN_SHARE` of the time from
receiving the notice to its deadline. Real clouds give 30 s (GCE, Azure) to 120 s (AWS), so the
default 5 s margin applies as given; the local cloud compresses its windows by its time scale
(x60: 0.5 s for GCE, 2 s for AWS), and the margin shrinks with them instead of ending the wait
before it begins. A notice seen late gets the same proportional margin.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from fleet.agent.checkpoints import CheckpointProbe
from fleet.agent.hooks import Hook
from fleet.agent.notice import Notice, TransientError, Watcher

log = logging.getLogger("fleet.agent")

Reporter = Callable[[Notice, dict[str, Any]], bool]
MARGIN_SHARE = 0.25


def effective_margin(margin: float, notice: Notice) -> float:
    """``margin``, capped at :data:`MARGIN_SHARE` of the notice's window as received."""
    window = max(0.0, notice.deadline - notice.received_at)
    return min(margin, MARGIN_SHARE * window)


@dataclass
class Outcome:
    """What the agent did about one notice (JSON-ready through :meth:`to_json`)."""

    cloud: str
    kind: str
    deadline: float
    hook: str
    hook_ok: bool
    hook_detail: str
    hook_latency_s: float | None
    checkpoint_committed: bool  # the job's final state is in the newest checkpoint
    checkpoint_new: bool  # ... and that checkpoint was committed after the notice
    checkpoint_step: int | None  # the newest valid checkpoint at the end (new or not)
    checkpoint_wait_s: float | None  # hook -> commit of a new final checkpoint
    job_finished: bool
    seconds_left: float
    watched_checkpoints: bool = False
    acknowledged: bool = False
    reported: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line: notice kind, latency notice->hook, checkpoint committed or not."""
        head = f"{self.cloud} {self.kind} notice"
        if self.hook_latency_s is None:
            hook = "no hook"
        elif self.hook_ok:
            hook = f"{self.hook_detail} {self.hook_latency_s * 1000:.0f} ms after it"
        else:
            hook = f"hook failed ({self.hook_detail})"
        if self.checkpoint_new:
            ckpt = f"checkpoint step {self.checkpoint_step} committed {self.checkpoint_wait_s:.1f} s after the hook"
        elif self.checkpoint_committed:
            ckpt = f"checkpoint step {self.checkpoint_step} was already current (the job exited cleanly)"
        elif not self.watched_checkpoints:
            ckpt = "no checkpoint storage to watch"
        else:
            newest = "none at all" if self.checkpoint_step is None else f"newest is step {self.checkpoint_step}"
            ckpt = f"NO checkpoint committed since the notice ({newest})"
        tail = f"{self.seconds_left:.0f} s before the deadline"
        extras = [s for s, on in (("acknowledged", self.acknowledged), ("reported", self.reported)) if on]
        return f"{head}: {hook}; {ckpt}; {tail}" + (f" ({', '.join(extras)})" if extras else "")


def respond(
    notice: Notice,
    hook: Hook | None,
    *,
    probe: CheckpointProbe | None = None,
    margin: float = 5.0,
    watcher: Watcher | None = None,
    reporter: Reporter | None = None,
    poll: float = 0.2,
    settle: float = 3.0,
) -> Outcome:
    """Fire the hook, wait for the final checkpoint, acknowledge (final notices) and report."""
    fired_at = time.time()
    hook_ok, hook_detail, latency = False, "", None
    if hook is not None:
        result = hook.fire()
        fired_at, hook_ok, hook_detail = result.fired_at, result.ok, result.detail
        latency = max(0.0, fired_at - notice.received_at)
        (log.info if hook_ok else log.warning)("%s %s notice: %s", notice.cloud, notice.kind, hook_detail)
    info = _wait(notice, hook, probe, effective_margin(margin, notice), poll, settle)
    newest = info if info is not None or probe is None else probe.latest()
    current = info is not None or (newest is not None and _exited_cleanly(hook))
    outcome = Outcome(
        cloud=notice.cloud,
        kind=notice.kind,
        deadline=notice.deadline,
        hook=hook.describe() if hook else "",
        hook_ok=hook_ok,
        hook_detail=hook_detail,
        hook_latency_s=latency,
        checkpoint_committed=current,
        checkpoint_new=info is not None,
        checkpoint_step=None if newest is None else int(newest.step),
        checkpoint_wait_s=None if info is None else max(0.0, float(info.committed_at) - fired_at),
        job_finished=hook is None or not hook.running(),
        seconds_left=notice.seconds_left(),
        watched_checkpoints=probe is not None,
    )
    if watcher is not None and notice.final:
        outcome.acknowledged = _acknowledge(watcher, notice)
    if reporter is not None:
        outcome.reported = reporter(notice, outcome.to_json())
    outcome.seconds_left = notice.seconds_left()
    return outcome


def _wait(
    notice: Notice, hook: Hook | None, probe: CheckpointProbe | None, margin: float, poll: float, settle: float
) -> Any | None:
    """Poll until committed and the job settled, the job died with nothing saved, or the deadline nears."""
    until = notice.deadline - margin
    gone_since: float | None = None
    info = None
    while True:
        now = time.time()
        info = probe.committed_since(notice.received_at) if probe is not None else None
        finished = hook is None or not hook.expect_exit or not hook.running()
        if (probe is None or info is not None) and finished:
            break
        if _exited_cleanly(hook):
            break  # nothing newer will come: the job's newest checkpoint is its final state
        if hook is not None and hook.target_gone():
            gone_since = gone_since or now
            if now - gone_since >= settle:
                log.warning("the job exited without committing a checkpoint")
                break
        if now >= until:
            log.warning("deadline minus margin reached while waiting for the final checkpoint")
            break
        time.sleep(max(0.0, min(poll, until - now)))
    return info


def _exited_cleanly(hook: Hook | None) -> bool:
    return hook is not None and hook.job_exit_status() == 0


def _acknowledge(watcher: Watcher, notice: Notice, attempts: int = 3, pause: float = 0.2) -> bool:
    """Acknowledge, retrying a hiccup a few times; False (logged) when it never went through."""
    for attempt in range(1, attempts + 1):
        try:
            return watcher.acknowledge(notice)
        except TransientError as err:
            log.warning("could not acknowledge the %s notice (attempt %d/%d): %s", notice.cloud, attempt, attempts, err)
            time.sleep(pause)
    return False
