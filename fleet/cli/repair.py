"""``fleet repair [NAME] [--spec SPEC]``: rebuild the record from the providers' tags (the face
of ``fleet.operations.repair``).

An unreadable store file is moved aside (``state.db.broken-<time>``) and a fresh one
created; rows that hold garbage in a readable file are dropped (a fleet row keeps its name
and readable columns); then every named fleet (or, with no name, every fleet in the record and every
fleet tag found in the local cloud) is reconciled: instances found by tag are recorded,
recorded ones that no longer run are ended. ``--spec`` also restores the fleet's spec.
"""

from __future__ import annotations

import click

from fleet.cli.app import App, json_option, pass_app
from fleet.cli.complete import fleet_names
from fleet.cli.lifecycle import short_pool
from fleet.errors import FleetError
from fleet.operations.repair import NOT_FOUND, open_or_replace, repair_fleet, repair_rows, targets
from fleet.spec import load_spec
from fleet.state import Damage


@click.command("repair")
@click.argument("name", required=False, shell_complete=fleet_names)
@click.option("--spec", "spec_path", type=click.Path(dir_okay=False), help="The fleet's spec (restores it too).")
@json_option
@pass_app
def command(app: App, name: str | None, spec_path: str | None, as_json: bool) -> None:
    """Rebuild the state record of fleet NAME (or of every fleet found) from provider tags."""
    spec = load_spec(spec_path) if spec_path else None
    if spec is not None and name and name != spec.name:
        raise FleetError(f"fleet name {name!r} differs from the spec's name {spec.name!r}; give one of them")
    store, moved = open_or_replace(app)
    if moved and not as_json:
        app.warn(f"the state store was unreadable; moved it to {moved} and started a fresh one")
    damaged = repair_rows(store)
    if damaged and not as_json:
        app.warn(
            f"dropped {len(damaged)} damaged row(s) ({_damage_summary(damaged)}); "
            "what runs is read back from the providers' tags below"
        )
    results = [
        repair_fleet(store, fleet, providers, spec) for fleet, providers in targets(app, store, name, spec).items()
    ]
    if as_json:
        app.emit_json(
            {
                "moved_aside": str(moved) if moved else None,
                "rows_rebuilt": [d.to_dict() for d in damaged],
                "fleets": results,
            }
        )
        return
    if not results:
        app.console.print(
            "no fleets found in the record or by tag in the local cloud; name one: "
            "`fleet repair NAME` or `fleet repair --spec SPEC`"
        )
    for r in results:
        if r["status"] == NOT_FOUND:
            app.console.print(
                f"fleet [bold]{r['fleet']}[/]: not in the record and no instance carries its tag; nothing to rebuild"
            )
            continue
        pools = ", ".join(f"{short_pool(p)} x{n}" for p, n in sorted(r["pools"].items())) or "none running"
        app.console.print(
            f"fleet [bold]{r['fleet']}[/]: {r['running']} instance(s) found by tag "
            f"({r['discovered']} newly recorded, {r['ended']} recorded ones no longer run); "
            f"status {r['status']}; pools: {pools}"
        )
        for provider, error in r["provider_errors"].items():
            app.warn(f"{provider}: could not list instances ({error}); run repair again when it answers")


def _damage_summary(damaged: list[Damage]) -> str:
    """``plans x1, events x2`` (with the first reason of each table)."""
    tables: dict[str, list[Damage]] = {}
    for d in damaged:
        tables.setdefault(d.table, []).append(d)
    return "; ".join(f"{t} x{len(ds)}: {ds[0].why}" for t, ds in sorted(tables.items()))
