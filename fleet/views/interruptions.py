"""The timeline of every lost node of a fleet, from what the store records (pure: no I/O).

For each instance that ended ``preempted`` or ``lost``:

- **notice**: the kind and lead time of the node agent's ``interruption-notice`` for it
  (lead = the notice's deadline minus when the node received it), or none;
- **time to detect**: the loss (the instance's recorded end, on the provider clock) to the
  moment a ``fleet`` command saw it gone (``detected_at`` in the ending event; records
  written before it was kept say ``None``, unknown);
- **time to replace**: the loss to the launch of the first later instance in the same role
  (``worker`` or ``head``, from the plan), each replacement counted once; the store records
  when an instance was launched, not when its job started, so this is loss -> launch;
- **work lost**: per node, with the planner's model (``fleet.planning.economics``): a node
  checkpointing every ``tau`` seconds loses on average ``tau / 2`` of work since its last
  checkpoint (never more than the node ran), plus ``restart_seconds`` to start again; when
  the agent reports a final checkpoint committed after the notice, only the restart is lost. ``tau`` is the plan's
  ``checkpoint_interval_seconds``; without one the half-interval term is unknown and only the
  restart is counted (``model`` says so). GPU-hours are that time times the node's GPUs;
  dollars, that time at the node's price;
- **final checkpoint**: ``True``/``False`` as the agent reported it (and how many seconds before
  the deadline it committed), ``None`` when no report reached the store (unknown).

Times are epoch seconds. The notice's own times are on the node's wall clock; the local
cloud's notice also carries the simulated time, which is used there (as ``reconcile`` does).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from fleet.model import Plan
from fleet.state.records import EventKind, EventRecord, InstanceRecord

#: The ending event kinds that make a node lost (``terminated`` is the fleet's own doing).
LOSSES = frozenset({EventKind.PREEMPTED, EventKind.LOST})


@dataclass(frozen=True)
class Interruption:
    instance_id: str
    pool: str
    market: str
    role: str
    gpus: int
    price_per_hour: float
    reason: str  # preempted | lost
    launched_at: float
    lost_at: float
    notice_kind: str | None  # None: no notice reached the store
    notice_at: float | None
    notice_deadline: float | None
    lead_seconds: float | None  # deadline - received
    detected_at: float | None
    detect_seconds: float | None  # detected_at - lost_at
    replacement_id: str | None
    replacement_pool: str | None
    replace_seconds: float | None  # replacement launched - lost_at (0 when launched before)
    checkpoint_committed: bool | None  # None: unknown (no agent report)
    checkpoint_step: int | None
    committed_before_deadline_s: float | None
    lost_seconds: float
    lost_gpu_hours: float
    lost_dollars: float
    model: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def roles_of(plan: Plan | None) -> dict[str, str]:
    """Pool id -> role of the plan's allocations (``worker`` for pools the plan does not name)."""
    if plan is None:
        return {}
    return {a.offer.pool.id: a.role for a in plan.allocations}


def timeline(
    records: Iterable[InstanceRecord],
    events: Iterable[EventRecord],
    *,
    roles: dict[str, str],
    restart_seconds: float,
    checkpoint_interval_seconds: float | None,
) -> list[Interruption]:
    """Every lost node of ``records``, oldest loss first (see the module doc for each figure).

    ``roles``: pool id -> role (``roles_of(plan)``; a pool not named is ``worker``);
    ``checkpoint_interval_seconds``: the plan's (``None`` when it planned none);
    ``restart_seconds``: the spec's ``workload.restart_seconds``."""
    records = list(records)
    events = list(events)
    tau = checkpoint_interval_seconds
    notices = _final_notices(events)
    endings = {e.instance_id: e for e in events if e.kind in LOSSES and e.instance_id}
    lost = sorted(
        (r for r in records if r.end_reason in LOSSES and r.ended_at is not None), key=lambda r: (r.ended_at, r.id)
    )
    candidates = sorted((r for r in records), key=lambda r: (r.launched_at, r.id))
    taken: set[str] = set()
    out = []
    for r in lost:
        role = roles.get(r.pool, "worker")
        notice = notices.get(r.id)
        since = r.ended_at if notice is None else min(r.ended_at, notice[0])
        replacement = next(
            (
                c
                for c in candidates
                if c.id != r.id
                and c.id not in taken
                and roles.get(c.pool, "worker") == role
                and c.launched_at >= since
                and c.launched_at > r.launched_at
            ),
            None,
        )
        if replacement is not None:
            taken.add(replacement.id)
        ending = endings.get(r.id)
        detected = ending.detail.get("detected_at") if ending is not None else None
        detected = float(detected) if isinstance(detected, (int, float)) else None
        n_at, n_deadline, n_kind, n_detail = notice if notice is not None else (None, None, None, {})
        committed, step, before = _checkpoint(n_detail, n_at, n_deadline)
        lost_s, model = _work_lost(tau, restart_seconds, committed, r.ended_at - r.launched_at)
        out.append(
            Interruption(
                instance_id=r.id,
                pool=r.pool,
                market=r.market,
                role=role,
                gpus=r.gpus,
                price_per_hour=r.price_per_hour,
                reason=r.end_reason,
                launched_at=r.launched_at,
                lost_at=r.ended_at,
                notice_kind=n_kind,
                notice_at=n_at,
                notice_deadline=n_deadline,
                lead_seconds=None if n_at is None or n_deadline is None else max(0.0, n_deadline - n_at),
                detected_at=detected,
                detect_seconds=None if detected is None else max(0.0, detected - r.ended_at),
                replacement_id=replacement.id if replacement else None,
                replacement_pool=replacement.pool if replacement else None,
                replace_seconds=max(0.0, replacement.launched_at - r.ended_at) if replacement else None,
                checkpoint_committed=committed,
                checkpoint_step=step,
                committed_before_deadline_s=before,
                lost_seconds=lost_s,
                lost_gpu_hours=lost_s / 3600 * r.gpus,
                lost_dollars=lost_s / 3600 * r.price_per_hour,
                model=model,
            )
        )
    return out


def totals(items: Iterable[Interruption]) -> dict[str, Any]:
    """Counts and sums over a timeline (for headlines and the dashboard)."""
    items = list(items)
    replaced = [i.replace_seconds for i in items if i.replace_seconds is not None]
    return {
        "interruptions": len(items),
        "with_notice": sum(1 for i in items if i.notice_kind is not None),
        "replaced": len(replaced),
        "checkpoint_committed": sum(1 for i in items if i.checkpoint_committed),
        "checkpoint_unknown": sum(1 for i in items if i.checkpoint_committed is None),
        "lost_gpu_hours": sum(i.lost_gpu_hours for i in items),
        "lost_dollars": sum(i.lost_dollars for i in items),
        "mean_replace_seconds": sum(replaced) / len(replaced) if replaced else None,
    }


def _final_notices(events: list[EventRecord]) -> dict[str, tuple[float | None, float | None, str, dict[str, Any]]]:
    """Instance id -> (received, deadline, kind, detail) of its first final notice (advice such
    as an AWS rebalance recommendation is not a notice of loss). The local cloud's notice
    carries its simulated time: received and deadline are put on that clock."""
    out: dict[str, tuple[float | None, float | None, str, dict[str, Any]]] = {}
    for e in events:
        if e.kind != EventKind.NOTICE or not e.instance_id or e.instance_id in out:
            continue
        d = e.detail or {}
        kind = d.get("kind")
        if not isinstance(kind, str) or kind == "rebalance":
            continue
        received = _num(d.get("received_at"))
        deadline = _num(d.get("deadline"))
        raw = d.get("detail")
        local = _num(raw.get("time")) if d.get("cloud") == "local" and isinstance(raw, dict) else None
        if local is not None and received is not None and deadline is not None:
            received, deadline = local - (deadline - received), local
        out[e.instance_id] = (received if received is not None else e.ts, deadline, kind, d)
    return out


def _checkpoint(
    detail: dict[str, Any], received: float | None, deadline: float | None
) -> tuple[bool | None, int | None, float | None]:
    """(committed, step, seconds before the deadline) from the agent's report; unknown -> None."""
    committed = detail.get("checkpoint_committed")
    if not isinstance(committed, bool) or not detail.get("watched_checkpoints", True):
        return None, None, None
    step = detail.get("checkpoint_step")
    step = step if isinstance(step, int) and not isinstance(step, bool) else None
    wait = _num(detail.get("checkpoint_wait_s"))
    before = None
    if detail.get("checkpoint_new") and wait is not None and received is not None and deadline is not None:
        before = deadline - (received + (_num(detail.get("hook_latency_s")) or 0.0) + wait)
    return committed, step, before


def _work_lost(tau: float | None, restart: float, committed: bool | None, ran: float) -> tuple[float, str]:
    """Seconds of one node's work lost: the restart, plus (unless the final checkpoint
    committed) half the checkpoint interval, never more than the node ran."""
    if committed:
        return restart, f"final checkpoint committed: the restart only ({restart:.0f} s)"
    if tau is None:
        return restart, f"restart {restart:.0f} s; no checkpoint interval planned, work since it unknown"
    return min(tau / 2, max(0.0, ran)) + restart, (
        f"half the planned checkpoint interval ({tau:.0f} s / 2, at most what the node ran) + restart {restart:.0f} s"
    )


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
