"""``fleet status NAME``: what runs now (from the providers), per pool and per instance, with
$/h, age, interruptions and cost so far. Reconciles the record unless another command holds
the fleet (then it shows the providers' view and says so). A provider that could not be read
is said to be unread (status ``unknown``, its pools' counts ``?``, exit status 1), never counted
as running nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from typing import Any

import click

from fleet.cli.app import App, json_option, pass_app, shown
from fleet.cli.complete import fleet_names
from fleet.cli.lifecycle import EXIT_SHORT, FleetView, duration, money, readable_store
from fleet.cli.tables import Column, pool_label, print_table, wide_option
from fleet.errors import FleetError
from fleet.provisioning.accounting import CostSummary
from fleet.state import FleetStatus, StateStore
from fleet.views.status import UNKNOWN, condition, snapshot  # noqa: F401  (computed there, rendered here)


@click.command("status")
@click.argument("name", required=False, shell_complete=fleet_names)
@click.option("--all", "-A", "include_down", is_flag=True, help="Without NAME: list the fleets that are down too.")
@click.option("--check", is_flag=True, help="Exit 3 when a fleet runs short of its plan (for scripts and probes).")
@click.option("--watch", "-w", is_flag=True, help="Refresh until interrupted (Ctrl-C).")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=2.0,
    show_default=True,
    help="Seconds between refreshes with --watch.",
)
@click.option("--times", type=click.IntRange(min=0), default=0, help="With --watch: stop after this many refreshes.")
@click.option(
    "--limit", type=click.IntRange(min=0), default=30, show_default=True, help="Instance rows to show (0 = all)."
)
@wide_option
@json_option
@pass_app
def command(
    app: App,
    name: str | None,
    include_down: bool,
    check: bool,
    watch: bool,
    interval: float,
    times: int,
    limit: int,
    wide: bool,
    as_json: bool,
) -> None:
    """Show fleet NAME, or every fleet: instances, pools, state, $/h, age, interruptions, cost so far.

    Without NAME, one line per fleet that is not down (-A: every fleet), each read from its
    providers. Exit status 0 when the fleet could be read, whatever its state (as `kubectl
    get`); with --check, 3 when it runs short of its plan. 1 when a provider could not be read.
    """
    if name is None:
        if watch:
            raise click.UsageError("--watch needs a fleet NAME")
        _list_fleets(app, include_down, check, wide, as_json)
        return
    store, _ = readable_store(app)  # a store that cannot be written is read: `look` says so
    if not watch:
        data, view = snapshot(app, store, name)
        if as_json:
            app.emit_json(data)
        else:
            render(app, data, view, limit, wide)
        if data["provider_errors"]:
            raise FleetError(
                f"could not read {', '.join(sorted(data['provider_errors']))}: fleet {name}'s instances "
                "there are not known; run `fleet status` again"
            )
        if check and data["status"] == FleetStatus.SHORT:
            raise SystemExit(EXIT_SHORT)
        return
    refreshes = 0
    try:
        if as_json:
            while times == 0 or refreshes < times:
                click.echo(json.dumps(snapshot(app, store, name)[0], default=str))
                refreshes += 1
                if times == 0 or refreshes < times:
                    time.sleep(interval)
            return
        if not app.console.is_terminal:  # a pipe or a log: one full frame after another
            while times == 0 or refreshes < times:
                data, view = snapshot(app, store, name)
                render(app, data, view, limit, wide)
                refreshes += 1
                if times == 0 or refreshes < times:
                    time.sleep(interval)
            return
        _watch_in_place(app, store, name, interval, times, limit, wide)
    except KeyboardInterrupt:
        pass


def _watch_in_place(
    app: App, store: StateStore, name: str, interval: float, times: int, limit: int, wide: bool
) -> None:
    """Redraw the fleet in place on a terminal (like ``top``): each frame fits the screen — the
    headline and pools always shown, the instance list cut to the rows left with "N more" —
    and is drawn from the top-left corner over the last one (each line erased to its end, the
    rest of the screen below it erased), so nothing piles up in the scrollback. The cursor is
    hidden while watching and left below the last frame."""
    out = app.console
    term = out.file
    term.write("\x1b[?25l\x1b[H\x1b[2J")  # hide the cursor, clear the screen once
    try:
        refreshes = 0
        while times == 0 or refreshes < times:
            data, view = snapshot(app, store, name)
            lines = frame(app, data, view, limit, wide, out.height).split("\n")[: max(1, out.height - 1)]
            term.write("\x1b[H" + "".join(f"{line}\x1b[K\r\n" for line in lines[:-1]) + f"{lines[-1]}\x1b[K\x1b[J")
            term.flush()
            refreshes += 1
            if times == 0 or refreshes < times:
                time.sleep(interval)
    finally:
        term.write("\r\n\x1b[?25h")
        term.flush()


def frame(app: App, data: dict[str, Any], view: FleetView, limit: int, wide: bool, height: int) -> str:
    """``render``'s output fitted to ``height`` rows (one spare for the cursor): the instance list
    gets what the headline and pools leave, at least none."""
    out = app.console
    with out.capture() as captured:
        render_head(app, data, wide, in_frame=True)
    head = captured.get()
    room = height - 1 - head.count("\n")
    rows = max(0, room - 4) if limit == 0 else max(0, min(limit, room - 4))  # blank, title, header, "N more"
    while True:
        with out.capture() as captured:
            render_instances(app, data, view, rows, wide, fitted_to_screen=True)
        tail = captured.get()
        over = tail.count("\n") - room
        if over <= 0 or rows == 0:
            return (head + tail).rstrip("\n")
        rows = max(0, rows - over)  # a note (a column left out for width) took a row


def _list_fleets(app: App, include_down: bool, check: bool, wide: bool, as_json: bool) -> None:
    """``fleet status`` without NAME (``fleet.cli.overview``)."""
    from fleet.cli import overview

    rows, hidden = overview.overview(app, include_down=include_down)
    if as_json:
        app.emit_json(rows)
    else:
        overview.render(app, rows, hidden, wide)
    if overview.unread(rows):
        raise FleetError(f"could not read fleet(s) {', '.join(overview.unread(rows))}; `fleet status NAME` says why")
    if check and any(r["status"] == FleetStatus.SHORT for r in rows):
        raise SystemExit(EXIT_SHORT)


def headline(
    name: str, status: str, running: int, planned: int | None, cost: CostSummary, unread: Collection[str] = ()
) -> list[str]:
    """The fleet in a few short lines (they fit 80 columns); ``$/h`` is what runs now costs per hour.

    ``planned`` is None when no applied plan is recorded (then it says why); ``unread``: the
    providers that could not be read (``running`` counts only the others, and says so)."""
    colour = {"up": "green", "short": "yellow", UNKNOWN: "red"}.get(status, "bold")
    saved = (
        f"; saved {money(cost.savings)} ({cost.savings_fraction:.0%}) vs the same nodes on-demand"
        if cost.savings is not None and cost.savings_fraction is not None
        else ""
    )
    counts = (
        f"{running} of {planned} planned instances running" if planned is not None else f"{running} instance(s) running"
    )
    if unread:
        counts = f"{', '.join(sorted(unread))} could not be read; {counts} on the others"
    why = [] if planned is not None else [f"no applied plan recorded: {_why_no_plan(status)}"]
    return [
        f"fleet [bold]{name}[/]: [{colour}]{status}[/], {counts} ({cost.running_gpus} GPUs)",
        *why,
        f"price now      {money(cost.rate_per_hour, True)} (spot {money(cost.spot_rate_per_hour, True)}, "
        f"on-demand {money(cost.on_demand_rate_per_hour, True)})",
        f"cost so far    {money(cost.cost_so_far)}{saved}",
        f"interruptions  {cost.interruptions}",
    ]


def _why_no_plan(status: str) -> str:
    if status == FleetStatus.REPAIRED:
        return "the record was rebuilt from tags; `fleet up SPEC` plans it again"
    if status == FleetStatus.DOWN:
        return "the fleet was taken down"
    return "the last `fleet up` did not finish; run it again to apply a plan"


def render(app: App, data: dict[str, Any], view: FleetView, limit: int, wide: bool = False) -> None:
    """Print ``data`` (from ``snapshot``) for people: headline, pools, instances."""
    render_head(app, data, wide)
    render_instances(app, data, view, limit, wide)


def render_head(app: App, data: dict[str, Any], wide: bool = False, in_frame: bool = False) -> None:
    """The headline, warnings and the pools table of ``data`` (``in_frame``: every line on the
    console, warnings included, as a ``--watch`` frame must hold them)."""
    cost = CostSummary(**data["cost"])
    out = app.console
    for line in headline(
        data["fleet"], data["status"], data["running"], data["planned"], cost, data["provider_errors"]
    ):
        out.print(line)
    for line in bill_lines(data["bill"]):
        out.print(line)
    if data["state_unwritable"]:
        message = f"{data['state_unwritable']}; showing the providers' view, the record was not updated"
        if in_frame:
            out.print(f"[yellow]warning:[/] {message}")
        else:
            app.warn(message)
    if data["busy"]:
        out.print(
            f"[yellow]{data['busy']} holds this fleet right now: showing the providers' view, "
            "the record was not updated[/]"
        )
    for provider, error in data["provider_errors"].items():
        out.print(f"[red]{provider} could not be read[/]: {shown(error)}")
    for held in data["stopped"]:
        out.print(
            f"[yellow]{shown(held['id'])} {shown(held['reason'])} {duration(held['stopped_seconds'])} ago "
            f"({pool_label(held['pool'], wide)}): stopped, still billing storage "
            f"{money(held['storage_per_hour'], True)}; re-bid it or `fleet down` ends it[/]"
        )
    for ended in data["ended"]:
        out.print(f"[yellow]{shown(ended['id'])} {shown(ended['reason'])}[/] since the last look")
    columns = [
        Column("pool"),
        Column("market"),
        Column("run", right=True),
        Column("plan", right=True),
        Column("$/h", right=True),
        Column("preempted", right=True),
    ]
    rows = [
        [
            pool_label(p["pool"], wide),
            p["market"],
            "?" if p["running"] is None else str(p["running"]),
            "-" if p["planned"] is None else str(p["planned"]),
            money(p["price_per_hour"]),
            str(p["interruptions"]),
        ]
        for p in data["pools"]
    ]
    styles = [
        "red"
        if p["running"] is None
        else "yellow"
        if p["planned"] is not None and p["running"] < p["planned"]
        else None
        for p in data["pools"]
    ]
    out.print()
    print_table(out, "pools", columns, rows, wide=wide, styles=styles)


def bill_lines(bill: dict[str, Any]) -> list[str]:
    """Planned against billed (``fleet.views.status.bill_summary``) in a line, then one warning per
    instance billed beyond the budget, with what ``budget.cap_action`` does about it."""
    if not bill["instances"]:
        return []
    if not bill["read"]:
        return [f"billed         not read yet for the {bill['instances']} running instance(s)"]
    ratio = f", {bill['ratio']:.2f}x" if bill["ratio"] is not None else ""
    lines = [
        f"billed         {money(bill['billed_per_hour'], True)} for {bill['read']} of {bill['instances']} "
        f"instance(s) (planned {money(bill['planned_per_hour'], True)}{ratio})"
    ]
    act = {
        "warn": "warned only (budget.cap_action: warn)",
        "replace": "the rebalancer replaces it",
        "destroy": "the rebalancer terminates it",
    }[bill["cap_action"]]
    lines += [f"[yellow]over budget:[/] {shown(b['message'])}; {act}" for b in bill["breaches"]]
    return lines


def render_instances(
    app: App, data: dict[str, Any], view: FleetView, limit: int, wide: bool = False, fitted_to_screen: bool = False
) -> None:
    """The instances table of ``data``: ``limit`` rows (0: all, unless ``fitted_to_screen``, where 0
    means none fit), then how many more there are. Ages on the local cloud are on its simulated
    clock, and the header says so (``fleet list`` shows wall-clock times)."""
    out = app.console
    every = data["instances"]
    listed = every[:limit] if limit or fitted_to_screen else every
    simulated = data["backend"] == "local"
    if listed:
        columns = [
            Column("id"),
            Column("pool"),
            Column("market", drop=1),
            Column("state"),
            Column("$/h", right=True),
            Column("billed", right=True, drop=2),
            Column("sim age" if simulated else "age", right=True),
        ]
        rows = [
            [
                shown(i["id"]),
                pool_label(i["pool"], wide),
                i["market"],
                i["state"] + (" [yellow](notice)[/]" if i["notice"] else ""),
                money(i["price_per_hour"]),
                "-" if i.get("billed_per_hour") is None else money(i["billed_per_hour"]),
                duration(i["age_seconds"]),
            ]
            for i in listed
        ]
        out.print()
        title = "instances (ages on the local cloud's simulated clock)" if simulated else "instances"
        print_table(out, title, columns, rows, wide=wide)
    if len(listed) < len(every):
        more = "a taller terminal shows more" if fitted_to_screen else "--limit 0 shows all"
        out.print(f"[dim]{len(every) - len(listed)} more instances; {more}[/]")
