"""``fleet history NAME``: launches, interruptions, terminations and cost so far, oldest first."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any

import click

from fleet.provisioning.accounting import summarize
from fleet.cli.app import App, json_option, pass_app
from fleet.cli.lifecycle import look, money, store_of
from fleet.cli.status import condition, headline
from fleet.cli.tables import Column, pool_label, print_table, wide_option
from fleet.state import EventRecord


@click.command("history")
@click.argument("name")
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True,
              help="Most recent events to show (0 = all).")
@wide_option
@json_option
@pass_app
def command(app: App, name: str, limit: int, wide: bool, as_json: bool) -> None:
    """Show what happened to fleet NAME: launches, interruptions, terminations, cost so far."""
    store = store_of(app)
    view = look(app, store, name, "history")
    events = store.events(name)
    cost = summarize(store.instances(name), view.clock)
    launches = store.launches(name)
    if as_json:
        app.emit_json({"fleet": name, "status": view.record.status, "cost": cost.to_dict(),
                       "counts": dict(Counter(e.kind for e in events)),
                       "events": [e.to_dict() for e in events], "launches": [l.to_dict() for l in launches]})
        return
    running = view.obs.counts()
    planned = view.plan.counts() if view.plan else {}
    status = condition(view.record.status, running, planned)
    for line in headline(name, status, sum(running.values()), sum(planned.values()), cost):
        app.console.print(line)
    counts = Counter(e.kind for e in events)
    app.console.print(", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no events yet")
    shown = events if limit == 0 else events[-limit:]
    columns = [Column("time (UTC)"), Column("event"), Column("instance"), Column("pool", drop=1),
               Column("detail", flex=True)]
    rows = [[_when(e.ts), e.kind, e.instance_id or "-", pool_label(e.pool, wide) if e.pool else "-", _detail(e)]
            for e in shown]
    app.console.print()
    print_table(app.console, f"events ({len(shown)} of {len(events)}, on the provider clock)", columns, rows,
                wide=wide)
    spent = sum(l.count for l in launches)
    app.console.print(f"{len(launches)} launch call(s) asked for {spent} instance(s); "
                      f"{sum(l.launched for l in launches)} came back; cost so far {money(cost.cost_so_far)}")


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%m-%d %H:%M:%S")


def _detail(e: EventRecord) -> str:
    keep: dict[str, Any] = {k: v for k, v in e.detail.items() if k not in ("token",) and v not in ("", None, {})}
    return ", ".join(f"{k}={v}" for k, v in sorted(keep.items()))
