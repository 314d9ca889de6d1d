"""``fleet status`` without a NAME: one line per fleet, each read from its providers (as
``fleet status NAME`` reads one; ``fleet list`` shows the record without asking them).

Fleets that are down are left out unless ``--all``; a fleet that could not be read is listed
as ``unknown`` (or ``error``, with the reason) and makes the exit status 1.
"""

from __future__ import annotations

from typing import Any

from fleet.cli.app import App, shown
from fleet.cli.lifecycle import money, store_exists
from fleet.cli.tables import Column, print_table
from fleet.views.status import ERROR, overview  # noqa: F401  (computed there, rendered here)


def render(app: App, rows: list[dict[str, Any]], hidden: int, wide: bool) -> None:
    """The fleets as a table (80 columns: the backend goes first when it does not fit)."""
    out = app.console
    if not rows:
        where = app.state_url if store_exists(app) else f"{app.state_url} (no state store yet)"
        extra = f"; {hidden} down (-A shows them)" if hidden else ""
        out.print(f"no fleets running in {where}{extra}; create one with `fleet up SPEC`")
        return
    colour = {"up": "green", "short": "yellow", "unknown": "red", ERROR: "red"}
    columns = [
        Column("fleet"),
        Column("status"),
        Column("run", right=True),
        Column("plan", right=True),
        Column("GPUs", right=True),
        Column("$/h", right=True),
        Column("cost so far", right=True),
        Column("backend", drop=1),
    ]
    table = [
        [
            shown(r["fleet"]),
            r["status"],
            "?" if r["running"] is None else str(r["running"]),
            "-" if r["planned"] is None else str(r["planned"]),
            "-" if r["gpus"] is None else str(r["gpus"]),
            money(r["price_per_hour"]),
            money(r["cost_so_far"]),
            r["backend"] or "-",
        ]
        for r in rows
    ]
    styles = [colour.get(r["status"]) for r in rows]
    print_table(out, "fleets", columns, table, wide=wide, styles=styles)
    for r in rows:
        if r["error"]:
            out.print(f"[red]{shown(r['fleet'])}[/]: {shown(r['error'])}")
        for provider in sorted(r["provider_errors"]):
            out.print(
                f"[red]{shown(r['fleet'])}: {provider} could not be read[/]; `fleet status {shown(r['fleet'])}` "
                "says why"
            )
    if hidden:
        out.print(f"[dim]{hidden} fleet(s) down not shown; -A shows them[/]")


def unread(rows: list[dict[str, Any]]) -> list[str]:
    """The fleets that could not be read (their counts are not known)."""
    return [r["fleet"] for r in rows if r["error"] or r["provider_errors"]]
