"""``fleet history NAME``: launches, interruptions, terminations and cost so far, oldest first."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any

import click

from fleet.cli.app import App, json_option, pass_app, shown
from fleet.cli.complete import fleet_names
from fleet.cli.lifecycle import duration, look, money, readable_store
from fleet.cli.runs import Run, current_run, events_of, instances_of, launches_of
from fleet.cli.status import bill_lines, condition, headline
from fleet.cli.tables import Column, pool_label, print_table, wide_option
from fleet.provisioning.accounting import summarize
from fleet.safetext import safe_data
from fleet.state import EventRecord
from fleet.views import bills, history


@click.command("history")
@click.argument("name", shell_complete=fleet_names)
@click.option(
    "--limit", type=click.IntRange(min=0), default=50, show_default=True, help="Most recent events to show (0 = all)."
)
@click.option(
    "--all",
    "every_run",
    is_flag=True,
    help="Every run of this fleet name (a `fleet up` after `fleet down` starts a new run).",
)
@click.option(
    "--interruptions",
    "lost_nodes",
    is_flag=True,
    help="The timeline of every lost node: notice, detection, replacement, work lost, checkpoint.",
)
@wide_option
@json_option
@pass_app
def command(app: App, name: str, limit: int, every_run: bool, lost_nodes: bool, wide: bool, as_json: bool) -> None:
    """Show what happened to fleet NAME: launches, interruptions, terminations, cost so far."""
    store, _ = readable_store(app)  # read-only commands read a store that cannot be written
    if lost_nodes:
        store.get_fleet(name)
        _interruptions(app, history.interruptions(store, name, every_run=every_run), wide, as_json)
        return
    view = look(app, store, name, "history")
    every = store.events(name)
    run = current_run(store, name)
    shown_run = Run(run.number, 0, None) if every_run else run
    events = events_of(shown_run, every)
    records = instances_of(shown_run, store.instances(name), every)
    cost = summarize(records, view.clock)
    bill = history.bill_of(store, name, records)
    launches = launches_of(shown_run, store.launches(name))
    if as_json:
        app.emit_json(
            {
                "fleet": name,
                "status": view.record.status,
                "run": run.number,
                "all_runs": every_run,
                "cost": cost.to_dict(),
                "bill": bill,
                "instances": safe_data(bills.rows(records)),
                "counts": dict(Counter(e.kind for e in events)),
                "events": safe_data([e.to_dict() for e in events]),
                "launches": safe_data([launch.to_dict() for launch in launches]),
            }
        )
        return
    running = view.obs.counts()
    planned = view.plan.counts() if view.plan else {}
    status = condition(view.record.status, running, planned, view.obs.errors)
    for line in headline(
        name, status, sum(running.values()), sum(planned.values()) if view.plan else None, cost, view.obs.errors
    ):
        app.console.print(line)
    for line in bill_lines(bill):
        app.console.print(line)
    if run.number > 1:
        app.console.print(
            f"run {run.number} of this fleet name"
            + (" (cost and events of every run: --all)" if every_run else "; --all shows every run")
        )
    counts = Counter(e.kind for e in events)
    app.console.print(", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no events yet")
    listed = events if limit == 0 else events[-limit:]
    columns = [
        Column("time (UTC)"),
        Column("event"),
        Column("instance"),
        Column("pool", drop=1),
        Column("detail", flex=True),
    ]
    rows = [
        [
            _when(e.ts),
            e.kind,
            shown(e.instance_id or "-"),
            pool_label(e.pool, wide) if e.pool else "-",
            shown(_detail(e)),
        ]
        for e in listed
    ]
    app.console.print()
    print_table(
        app.console, f"events ({len(listed)} of {len(events)}, on the provider clock)", columns, rows, wide=wide
    )
    spent = sum(launch.count for launch in launches)
    app.console.print(
        f"{len(launches)} launch call(s) asked for {spent} instance(s); "
        f"{sum(launch.launched for launch in launches)} came back; cost so far {money(cost.cost_so_far)}"
    )


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%m-%d %H:%M:%S")


def _detail(e: EventRecord) -> str:
    keep: dict[str, Any] = {k: v for k, v in e.detail.items() if k not in ("token",) and v not in ("", None, {})}
    return ", ".join(f"{k}={v}" for k, v in sorted(keep.items()))


def _interruptions(app: App, data: dict[str, Any], wide: bool, as_json: bool) -> None:
    """``--interruptions``: one row per lost node, then the totals and the work-lost model."""
    if as_json:
        app.emit_json(safe_data(data))
        return
    out = app.console
    items, totals = data["interruptions"], data["totals"]
    if not items:
        out.print(f"fleet {shown(data['fleet'])}: no node lost" + (" in this run" if not data["all_runs"] else ""))
        return
    columns = [
        Column("lost (UTC)"),
        Column("instance"),
        Column("pool", drop=2),
        Column("notice"),
        Column("detect", right=True),
        Column("replaced", right=True),
        Column("by", drop=1),
        Column("checkpoint"),
        Column("lost GPU-h", right=True),
        Column("lost $", right=True),
    ]
    rows = [
        [
            _when(i["lost_at"]),
            shown(i["instance_id"]),
            pool_label(i["pool"], wide),
            _notice(i),
            "?" if i["detect_seconds"] is None else duration(i["detect_seconds"]),
            "no" if i["replace_seconds"] is None else duration(i["replace_seconds"]),
            pool_label(i["replacement_pool"], wide) if i["replacement_pool"] else "-",
            _checkpoint(i),
            f"{i['lost_gpu_hours']:.2f}",
            money(i["lost_dollars"]),
        ]
        for i in items
    ]
    print_table(out, f"lost nodes ({len(items)}, on the provider clock)", columns, rows, wide=wide)
    out.print(
        f"{totals['with_notice']} with a notice, {totals['replaced']} replaced, final checkpoint committed "
        f"on {totals['checkpoint_committed']} ({totals['checkpoint_unknown']} unknown); work lost "
        f"{totals['lost_gpu_hours']:.2f} GPU-h, {money(totals['lost_dollars'])}"
    )
    for model in sorted({i["model"] for i in items}):
        out.print(f"[dim]work lost per node: {shown(model)}[/]")


def _notice(i: dict[str, Any]) -> str:
    if i["notice_kind"] is None:
        return "none"
    lead = "" if i["lead_seconds"] is None else f" {duration(i['lead_seconds'])} ahead"
    return shown(i["notice_kind"]) + lead


def _checkpoint(i: dict[str, Any]) -> str:
    if i["checkpoint_committed"] is None:
        return "unknown"
    if not i["checkpoint_committed"]:
        return "not committed"
    before = i["committed_before_deadline_s"]
    return "committed" + ("" if before is None else f" {duration(before)} before")
