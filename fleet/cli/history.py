"""``fleet history NAME``: launches, interruptions, terminations and cost so far, oldest first."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any

import click
from rich.table import Table

from fleet.provisioning.accounting import summarize
from fleet.cli.app import App, json_option, pass_app
from fleet.cli.lifecycle import look, money, short_pool, store_of
from fleet.cli.status import headline
from fleet.state import EventRecord


@click.command("history")
@click.argument("name")
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True,
              help="Most recent events to show (0 = all).")
@json_option
@pass_app
def command(app: App, name: str, limit: int, as_json: bool) -> None:
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
    running = len(view.obs.instances)
    planned = sum(view.plan.counts().values()) if view.plan else None
    app.console.print(headline(name, view.record.status, running, planned, cost))
    counts = Counter(e.kind for e in events)
    app.console.print(", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no events yet")
    shown = events if limit == 0 else events[-limit:]
    table = Table(title=f"events ({len(shown)} of {len(events)}; times on the provider clock, UTC)",
                  title_justify="left")
    table.add_column("time", no_wrap=True)
    table.add_column("event", no_wrap=True)
    for col in ("instance", "pool", "detail"):
        table.add_column(col, overflow="fold")
    for e in shown:
        table.add_row(_when(e.ts), e.kind, e.instance_id, short_pool(e.pool) if e.pool.count("/") == 4 else e.pool,
                      _detail(e))
    app.console.print(table)
    spent = sum(l.count for l in launches)
    app.console.print(f"{len(launches)} launch call(s) asked for {spent} instance(s); "
                      f"{sum(l.launched for l in launches)} came back; cost so far {money(cost.cost_so_far)}")


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%m-%d %H:%M:%S")


def _detail(e: EventRecord) -> str:
    keep: dict[str, Any] = {k: v for k, v in e.detail.items() if k not in ("token",) and v not in ("", None, {})}
    return ", ".join(f"{k}={v}" for k, v in sorted(keep.items()))[:80]
