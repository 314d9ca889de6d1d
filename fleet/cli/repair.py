"""``fleet repair [NAME] [--spec SPEC]``: rebuild the record from the providers' tags.

An unreadable store file is moved aside (``state.db.broken-<time>``) and a fresh one
created; rows that hold garbage in a readable file are dropped (a fleet row keeps its name
and readable columns); then every named fleet (or, with no name, every fleet in the record and every
fleet tag found in the local cloud) is reconciled: instances found by tag are recorded,
recorded ones that no longer run are ended. ``--spec`` also restores the fleet's spec.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from fleet.cli.app import App, json_option, pass_app
from fleet.cli.complete import fleet_names
from fleet.cli.lifecycle import local_providers, providers_of, short_pool
from fleet.errors import FleetError
from fleet.model import TAG_PLAN
from fleet.provisioning.reconcile import observe, sync
from fleet.spec import Backend, FleetSpec, load_spec
from fleet.state import CorruptStoreError, Damage, FleetStatus, StateStore, open_store
from fleet.state.db import path_from_url
from fleet.state.postgres import is_postgres_url
from providers.base import Provider

NOT_FOUND = "not found"


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
    store, moved = _open_or_replace(app)
    if moved and not as_json:
        app.warn(f"the state store was unreadable; moved it to {moved} and started a fresh one")
    damaged = store.damage()
    store.rebuild_rows(damaged)
    if damaged and not as_json:
        app.warn(
            f"dropped {len(damaged)} damaged row(s) ({_damage_summary(damaged)}); "
            "what runs is read back from the providers' tags below"
        )
    results = [_repair(store, fleet, providers, spec) for fleet, providers in _targets(app, store, name, spec).items()]
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


def _open_or_replace(app: App) -> tuple[StateStore, Path | None]:
    """The store, verified; an unreadable file is moved aside (with its WAL files) first."""
    if is_postgres_url(app.state_url):  # a database is repaired in place
        store = open_store(app.state_url, create=True)
        store.verify()
        return store, None
    path = path_from_url(app.state_url)
    try:
        store = open_store(app.state_url, create=True)
        store.verify()
        return store, None
    except CorruptStoreError:
        pass
    aside = path.with_name(f"{path.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{path}{suffix}")
        if src.exists():
            src.replace(Path(f"{aside}{suffix}"))
    return open_store(app.state_url, create=True), aside


def _targets(app: App, store: StateStore, name: str | None, spec: FleetSpec | None) -> dict[str, dict[str, Provider]]:
    """Fleet name -> the providers to read it from."""
    from providers.registry import local_cloud_root, providers_for

    if spec is not None:
        return {spec.name: providers_for(spec, app.home)}
    names = [name] if name else [f.name for f in store.list_fleets()]
    if not name and (local_cloud_root(app.home) / "cloud.db").exists():
        from providers.local import LocalCloud

        cloud = LocalCloud.open(local_cloud_root(app.home), time_scale=None, seed=None)
        names += sorted({i.fleet for i in cloud.all_instances(alive_only=True) if i.fleet} - set(names))
    out = {}
    for fleet in names:
        record = store.find_fleet(fleet)
        out[fleet] = providers_of(app, record) if record is not None else local_providers(app)
    return out


def _repair(store: StateStore, fleet: str, providers: dict[str, Provider], spec: FleetSpec | None) -> dict:
    with store.lock(fleet, "repair"):
        record = store.find_fleet(fleet)
        obs = observe(providers, fleet)
        if record is None and spec is None and not obs.instances:
            return {
                "fleet": fleet,
                "status": NOT_FOUND,
                "running": 0,
                "pools": {},
                "discovered": 0,
                "ended": 0,
                "plans_seen": [],
                "provider_errors": obs.errors,
            }
        if record is None or spec is not None:
            status = record.status if record is not None else FleetStatus.REPAIRED
            backend = spec.backend.value if spec is not None else Backend.LOCAL.value
            store.save_fleet(
                fleet,
                status=status,
                backend=backend,
                spec_json=spec.model_dump_json() if spec is not None else None,
                spec_hash=spec.spec_hash() if spec is not None else "",
            )
        result = sync(store, obs)
        plans = sorted({i.tags[TAG_PLAN] for i in obs.instances if TAG_PLAN in i.tags})
        return {
            "fleet": fleet,
            "status": store.get_fleet(fleet).status,
            "running": len(obs.instances),
            "pools": obs.counts(),
            "discovered": len(result.discovered),
            "ended": len(result.ended),
            "plans_seen": plans,
            "provider_errors": obs.errors,
        }
