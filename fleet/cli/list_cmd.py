"""``fleet list``: every fleet in the state store, from the record (no provider calls)."""

from __future__ import annotations

import time

import click

from fleet.cli.app import App, json_option, pass_app
from fleet.cli.lifecycle import duration, money, readable_store, store_exists
from fleet.cli.tables import Column, print_table, wide_option


@click.command("list")
@wide_option
@json_option
@pass_app
def command(app: App, wide: bool, as_json: bool) -> None:
    """List the fleets recorded in the state store (`fleet status NAME` checks the providers)."""
    if not store_exists(app):
        if as_json:
            app.emit_json([])
        else:
            app.console.print(f"no fleets yet (no state store at {app.state_url}); create one with `fleet up SPEC`")
        return
    store, _ = readable_store(app)  # read-only commands read a store that cannot be written
    rows = []
    for rec in store.list_fleets():
        alive = store.instances(rec.name, alive_only=True)
        rows.append(
            {
                "name": rec.name,
                "status": rec.status,
                "backend": rec.backend,
                "instances": len(alive),
                "gpus": sum(r.gpus for r in alive),
                "price_per_hour": sum(r.price_per_hour for r in alive),
                "spec_hash": rec.spec_hash,
                "updated_at": rec.updated_at,
            }
        )
    if as_json:
        app.emit_json(rows)
        return
    if not rows:
        app.console.print(f"no fleets in {app.state_url}; create one with `fleet up SPEC`")
        return
    columns = [
        Column("name"),
        Column("status"),
        Column("backend", drop=1),
        Column("instances", right=True),
        Column("GPUs", right=True),
        Column("$/h", right=True),
        Column("updated", right=True),
        Column("spec", wide=True),
    ]
    table_rows = [
        [
            r["name"],
            r["status"],
            r["backend"] or "-",
            str(r["instances"]),
            str(r["gpus"]),
            money(r["price_per_hour"]),
            f"{duration(time.time() - r['updated_at'])} ago",
            (r["spec_hash"] or "-")[:12],
        ]
        for r in rows
    ]
    print_table(app.console, f"fleets in {app.state_url}", columns, table_rows, wide=wide)
    app.console.print("[dim]counts are from the record; `fleet status NAME` asks the providers[/]")
