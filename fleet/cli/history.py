"""``fleet history NAME``: launches, interruptions, terminations and cost so far, oldest first."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any

import click

from fleet.provisioning.accounting import summarize
from fleet.cli.app import App, json_option, pass_app, shown
from fleet.cli.complete import fleet_names
from fleet.cli.lifecycle import look, money, readable_store
from fleet.cli.runs import Run, current_run, events_of, instances_of, launches_of
from fleet.cli.status import condition, headline
from fleet.safetext import safe_data
from fleet.cli.tables import Column, pool_label, print_table, wide_option
from fleet.state import EventRecord


@click.command("history")
@click.argument("name", shell_complete=fleet_names)
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True,
              help="Most recent events to show (0 = all).")
@click.option("--all", "every_run", is_flag=True,
              help="Every run of this fleet name (a `fleet up` after `fleet down` starts a new run).")
@wide_option
@json_option
@pass_app
def command(app: App, name: str, limit: int, every_run: bool, wide: bool, as_json: bool) -> None:
    """Show what happened to fleet NAME: launches, interruptions, terminations, cost so far."""
    store, _ = readable_store(app)      # read-only commands read a store that cannot be written
    view = look(app, store, name, "history")
    every = store.events(name)
    run = current_run(store, name)
    shown_run = Run(run.number, 0, None) if every_run else run
    events = events_of(shown_run, every)
    cost = summarize(instances_of(shown_run, store.instances(name), every), view.clock)
    launches = launches_of(shown_run, store.launches(name))
    if as_json:
        app.emit_json({"fleet": name, "status": view.record.status, "run": run.number, "all_runs": every_run,
                       "cost": cost.to_dict(),
                       "counts": dict(Counter(e.kind for e in events)),
                       "events": safe_data([e.to_dict() for e in events]),
                       "launches": safe_data([l.to_dict() for l in launches])})
        return
    running = view.obs.counts()
    planned = view.plan.counts() if view.plan else {}
    status = condition(view.record.status, running, planned, view.obs.errors)
    for line in headline(name, status, sum(running.values()), sum(planned.values()) if view.plan else None, cost,
                         view.obs.errors):
        app.console.print(line)
    if run.number > 1:
        app.console.print(f"run {run.number} of this fleet name" + (" (cost and events of every run: --all)"
                                                                     if every_run else "; --all shows every run"))
    counts = Counter(e.kind for e in events)
    app.console.print(", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no events yet")
    listed = events if limit == 0 else events[-limit:]
    columns = [Column("time (UTC)"), Column("event"), Column("instance"), Column("pool", drop=1),
               Column("detail", flex=True)]
    rows = [[_when(e.ts), e.kind, shown(e.instance_id or "-"), pool_label(e.pool, wide) if e.pool else "-",
             shown(_detail(e))]
            for e in listed]
    app.console.print()
    print_table(app.console, f"events ({len(listed)} of {len(events)}, on the provider clock)", columns, rows,
                wide=wide)
    spent = sum(l.count for l in launches)
    app.console.print(f"{len(launches)} launch call(s) asked for {spent} instance(s); "
                      f"{sum(l.launched for l in launches)} came back; cost so far {money(cost.cost_so_far)}")


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%m-%d %H:%M:%S")


def _detail(e: EventRecord) -> str:
    keep: dict[str, Any] = {k: v for k, v in e.detail.items() if k not in ("token",) and v not in ("", None, {})}
    return ", ".join(f"{k}={v}" for k, v in sorted(keep.items()))
