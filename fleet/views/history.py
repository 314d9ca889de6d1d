"""What happened to a fleet, from the store alone (no provider is asked): the interruption
timeline of its current run (or every run), capacity and cost over time, and the rebalancer's
actions. ``fleet history`` and the dashboard read it here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fleet.cli.runs import Run, current_run, events_of, instances_of
from fleet.model import Market
from fleet.rebalance.bills import Limits
from fleet.state import EventRecord, InstanceRecord, StateStore
from fleet.views import bills
from fleet.views import interruptions as timeline_of

#: Event kind the rebalancer records its actions under (``fleet.rebalance.inputs.EVENT_KIND``).
REBALANCE_EVENT = "rebalance"
#: Default ``workload.restart_seconds`` of a spec (``fleet.spec.Workload``), for records without one.
DEFAULT_RESTART_SECONDS = 300.0


@dataclass(frozen=True)
class FleetRecords:
    """The records of one run of a fleet (``every_run``: all of them)."""

    run: Run
    instances: list[InstanceRecord]
    events: list[EventRecord]


def records_of(store: StateStore, name: str, *, every_run: bool = False) -> FleetRecords:
    every = store.events(name)
    run = current_run(store, name)
    shown = Run(run.number, 0, None) if every_run else run
    return FleetRecords(run, instances_of(shown, store.instances(name), every), events_of(shown, every))


def restart_seconds_of(store: StateStore, name: str) -> float:
    """The recorded spec's ``workload.restart_seconds`` (the default when none was recorded)."""
    spec = store.get_fleet(name).to_dict().get("spec") or {}
    value = (spec.get("workload") or {}).get("restart_seconds") if isinstance(spec, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else DEFAULT_RESTART_SECONDS


def interruptions(
    store: StateStore, name: str, *, every_run: bool = False, recs: FleetRecords | None = None
) -> dict[str, Any]:
    """The fleet's interruption timeline and its totals, JSON-ready (``fleet history --interruptions``);
    ``recs``: the records already read with ``records_of`` (with the same ``every_run``)."""
    recs = recs or records_of(store, name, every_run=every_run)
    plan = store.latest_plan(name, applied_only=True) or store.latest_plan(name)
    restart = restart_seconds_of(store, name)
    items = timeline_of.timeline(
        recs.instances,
        recs.events,
        roles=timeline_of.roles_of(plan),
        restart_seconds=restart,
        checkpoint_interval_seconds=plan.totals.checkpoint_interval_seconds if plan else None,
    )
    return {
        "fleet": name,
        "run": recs.run.number,
        "all_runs": every_run,
        "checkpoint_interval_seconds": plan.totals.checkpoint_interval_seconds if plan else None,
        "restart_seconds": restart,
        "totals": timeline_of.totals(items),
        "interruptions": [i.to_dict() for i in items],
    }


def bill_of(store: StateStore, name: str, records: Iterable[InstanceRecord]) -> dict[str, Any]:
    """Planned against billed over the alive ones of ``records``, held to the recorded spec's
    budget (``fleet.views.bills.summary``; the default budget when no spec was recorded)."""
    return bills.summary([r for r in records if r.alive], Limits.of(store.get_fleet(name).to_dict()["spec"]))


def series(records: Iterable[InstanceRecord], now: float, *, points: int = 200) -> list[dict[str, float]]:
    """Capacity and cost over time: ``points`` samples from the first launch to ``now``
    (provider clock), each ``{t, running, gpus, spot_gpus, rate_per_hour, cost}`` (cost: accrued
    up to ``t``). Empty without records. One sweep over the launches and ends (an instance
    runs from its launch, included, to its end, excluded), so a fleet of thousands is cheap."""
    records = list(records)
    if not records:
        return []
    start = min(r.launched_at for r in records)
    end = max(now, max((r.ended_at or r.launched_at) for r in records))
    steps = max(1, points - 1)
    changes: list[tuple[float, int, int, int, float]] = []  # (time, running, gpus, spot gpus, $/h) deltas
    for r in records:
        spot = r.gpus if r.market == Market.SPOT.value else 0
        changes.append((r.launched_at, 1, r.gpus, spot, r.price_per_hour))
        if r.ended_at is not None:
            changes.append((max(r.ended_at, r.launched_at), -1, -r.gpus, -spot, -r.price_per_hour))
    changes.sort(key=lambda c: c[0])
    running = gpus = spot_gpus = 0
    rate = cost = 0.0
    at, k, out = start, 0, []
    for n in range(steps + 1):
        t = start + (end - start) * n / steps
        while k < len(changes) and changes[k][0] <= t:
            when, d_run, d_gpus, d_spot, d_rate = changes[k]
            cost += rate * (when - at) / 3600
            at = when
            running, gpus, spot_gpus, rate = running + d_run, gpus + d_gpus, spot_gpus + d_spot, rate + d_rate
            k += 1
        cost += rate * (t - at) / 3600
        at = t
        out.append(
            {
                "t": t,
                "running": running,
                "gpus": gpus,
                "spot_gpus": spot_gpus,
                "rate_per_hour": max(0.0, rate),
                "cost": cost,
            }
        )
    return out


def actions(events: Iterable[EventRecord], *, limit: int = 100) -> dict[str, Any]:
    """The rebalancer's actions and the plans applied: how many, and the newest ``limit``
    (oldest first)."""
    chosen = [e for e in events if e.kind in (REBALANCE_EVENT, "plan-applied")]
    return {"count": len(chosen), "recent": [e.to_dict() for e in chosen[-limit:]]}
