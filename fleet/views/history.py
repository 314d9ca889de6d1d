"""What happened to a fleet, from the store alone (no provider is asked): the interruption
timeline of its current run (or every run), capacity and cost over time, and the rebalancer's
actions. ``fleet history`` and the dashboard read it here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from fleet.cli.runs import Run, current_run, events_of, instances_of
from fleet.model import Market
from fleet.state import EventRecord, InstanceRecord, StateStore
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


def interruptions(store: StateStore, name: str, *, every_run: bool = False) -> dict[str, Any]:
    """The fleet's interruption timeline and its totals, JSON-ready (``fleet history --interruptions``)."""
    recs = records_of(store, name, every_run=every_run)
    plan = store.latest_plan(name, applied_only=True) or store.latest_plan(name)
    items = timeline_of.timeline(recs.instances, recs.events, plan=plan,
                                 restart_seconds=restart_seconds_of(store, name))
    return {"fleet": name, "run": recs.run.number, "all_runs": every_run,
            "checkpoint_interval_seconds": plan.totals.checkpoint_interval_seconds if plan else None,
            "restart_seconds": restart_seconds_of(store, name),
            "totals": timeline_of.totals(items), "interruptions": [i.to_dict() for i in items]}


def series(records: Iterable[InstanceRecord], now: float, *, points: int = 200) -> list[dict[str, float]]:
    """Capacity and cost over time: at most ``points`` samples from the first launch to ``now``
    (provider clock), each ``{t, running, gpus, spot_gpus, rate_per_hour, cost}`` (cost: accrued
    up to ``t``). Empty without records."""
    records = list(records)
    if not records:
        return []
    start = min(r.launched_at for r in records)
    end = max(now, max((r.ended_at or r.launched_at) for r in records))
    steps = max(1, points - 1)
    out = []
    for k in range(steps + 1):
        t = start + (end - start) * k / steps
        alive = [r for r in records if r.launched_at <= t and (r.ended_at is None or r.ended_at > t)]
        out.append({"t": t, "running": len(alive), "gpus": sum(r.gpus for r in alive),
                    "spot_gpus": sum(r.gpus for r in alive if r.market == Market.SPOT.value),
                    "rate_per_hour": sum(r.price_per_hour for r in alive),
                    "cost": sum(r.price_per_hour * _hours_until(r, t) for r in records if r.launched_at <= t)})
    return out


def actions(events: Iterable[EventRecord]) -> list[dict[str, Any]]:
    """The rebalancer's actions and the plans applied, oldest first."""
    return [e.to_dict() for e in events if e.kind in (REBALANCE_EVENT, "plan-applied")]


def _hours_until(record: InstanceRecord, t: float) -> float:
    end = t if record.ended_at is None else min(record.ended_at, t)
    return max(0.0, end - record.launched_at) / 3600.0
