"""Runs of a fleet: a name reused after ``fleet down`` starts a new run.

``fleet up`` on a fleet recorded as down records a ``run-started`` event; ``status`` and
``history`` then count cost and interruptions of the current run only (``history --all``
shows every run). A run is told apart by the order of events, not by clocks: an instance
belongs to the run in which its ``launched`` or ``discovered`` event was recorded, so a
frozen or stepped provider clock cannot mix two runs. Launch calls are told apart the same
way: the ``run-started`` event records the last launch id before the run (``after_launch``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fleet.state import EventKind, EventRecord, InstanceRecord, LaunchRecord, StateStore

RUN_STARTED = "run-started"
_JOINS = frozenset({EventKind.LAUNCHED, EventKind.DISCOVERED})


@dataclass(frozen=True)
class Run:
    number: int  # 1 for the first run of the name
    after_event: int  # events with a larger id belong to this run (0: every event)
    started_at: float | None  # on the provider clock; None for the first run
    after_launch: int = 0  # launch calls with a larger id belong to this run (0: every call)


def current_run(store: StateStore, fleet: str) -> Run:
    starts = store.events(fleet, kinds={RUN_STARTED})
    if not starts:
        return Run(1, 0, None)
    last = max(starts, key=lambda e: e.id)
    after_launch = last.detail.get("after_launch", 0)
    return Run(len(starts) + 1, last.id, last.ts, after_launch if isinstance(after_launch, int) else 0)


def start_run(store: StateStore, fleet: str, at: float) -> Run:
    """Record that ``fleet`` starts a new run at ``at`` (provider clock) and return it."""
    number = current_run(store, fleet).number + 1
    before = max((launch.id for launch in store.launches(fleet)), default=0)
    store.record_event(fleet, RUN_STARTED, detail={"run": number, "after_launch": before}, ts=at)
    return current_run(store, fleet)


def events_of(run: Run, events: Iterable[EventRecord]) -> list[EventRecord]:
    return [e for e in events if e.id > run.after_event]


def launches_of(run: Run, launches: Iterable[LaunchRecord]) -> list[LaunchRecord]:
    """The launch calls made during ``run`` (every call for a run recorded before ``after_launch``)."""
    return [launch for launch in launches if launch.id > run.after_launch]


def instances_of(run: Run, records: Iterable[InstanceRecord], events: Iterable[EventRecord]) -> list[InstanceRecord]:
    """The records of instances that joined the fleet during ``run``, and any still alive from before."""
    records = list(records)
    if run.after_event == 0:
        return records
    joined = {e.instance_id for e in events_of(run, events) if e.kind in _JOINS}
    return [r for r in records if r.id in joined or r.alive]
