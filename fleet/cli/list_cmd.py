"""``fleet list``: every fleet in the state store, from the record (no provider calls)."""

from __future__ import annotations

import time

import click
from rich.table import Table

from fleet.cli.app import App, json_option, pass_app
from fleet.cli.lifecycle import duration, money, store_exists, store_of


@click.command("list")
@json_option
@pass_app
def command(app: App, as_json: bool) -> None:
    """List the fleets recorded in the state store (`fleet status NAME` checks the providers)."""
    if not store_exists(app):
        if as_json:
            app.emit_json([])
        else:
            app.console.print(f"no fleets yet (no state store at {app.state_url}); create one with `fleet up SPEC`")
        return
    store = store_of(app)
    rows = []
    for rec in store.list_fleets():
        alive = store.instances(rec.name, alive_only=True)
        rows.append({"name": rec.name, "status": rec.status, "backend": rec.backend, "instances": len(alive),
                     "gpus": sum(r.gpus for r in alive), "price_per_hour": sum(r.price_per_hour for r in alive),
                     "spec_hash": rec.spec_hash, "updated_at": rec.updated_at})
    if as_json:
        app.emit_json(rows)
        return
    if not rows:
        app.console.print(f"no fleets in {app.state_url}; create one with `fleet up SPEC`")
        return
    table = Table(title=f"fleets in {app.state_url}", title_justify="left")
    for col in ("name", "status", "backend", "instances", "GPUs", "$/h", "updated"):
        table.add_column(col, justify="right" if col in ("instances", "GPUs", "$/h") else "left")
    for r in rows:
        table.add_row(r["name"], r["status"], r["backend"] or "-", str(r["instances"]), str(r["gpus"]),
                      money(r["price_per_hour"]), f"{duration(time.time() - r['updated_at'])} ago")
    app.console.print(table)
    app.console.print("[dim]counts are from the record; `fleet status NAME` asks the providers[/]")
