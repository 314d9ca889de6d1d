"""``fleet repair [NAME] [--spec SPEC]``: rebuild the record from the providers' tags.

An unreadable store file is moved aside (``state.db.broken-<time>``) and a fresh one created
(``open_or_replace``); rows that hold garbage in a readable file are dropped (``repair_rows``: a
fleet row keeps its name and readable columns); then every named fleet (or, with no name, every
fleet in the record and every fleet tag found in the local cloud: ``targets``) is reconciled
(``repair_fleet``): instances found by tag are recorded, recorded ones that no longer run are
ended. A spec also restores the fleet's spec.
"""

from __future__ import annotations

import time
from pathlib import Path

from fleet.model import TAG_PLAN
from fleet.operations.workspace import Workspace, local_providers, providers_of
from fleet.provisioning.reconcile import observe, sync
from fleet.spec import Backend, FleetSpec
from fleet.state import CorruptStoreError, Damage, FleetStatus, StateStore, open_store
from fleet.state.db import is_postgres_url, path_from_url
from providers.base import Provider

NOT_FOUND = "not found"


def repair_rows(store: StateStore) -> list[Damage]:
    """Drop the rows of ``store`` that hold garbage (a fleet row keeps its name and readable
    columns) and return what was dropped."""
    damaged = store.damage()
    store.rebuild_rows(damaged)
    return damaged


def open_or_replace(where: Workspace) -> tuple[StateStore, Path | None]:
    """The store, verified; an unreadable file is moved aside (with its WAL files) first."""
    if is_postgres_url(where.state_url):  # a database is repaired in place
        store = open_store(where.state_url, create=True)
        store.verify()
        return store, None
    path = path_from_url(where.state_url)
    try:
        store = open_store(where.state_url, create=True)
        store.verify()
        return store, None
    except CorruptStoreError:
        pass
    aside = path.with_name(f"{path.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{path}{suffix}")
        if src.exists():
            src.replace(Path(f"{aside}{suffix}"))
    return open_store(where.state_url, create=True), aside


def targets(
    where: Workspace, store: StateStore, name: str | None, spec: FleetSpec | None
) -> dict[str, dict[str, Provider]]:
    """Fleet name -> the providers to read it from."""
    from providers.registry import local_cloud_root, providers_for

    if spec is not None:
        return {spec.name: providers_for(spec, where.home)}
    names = [name] if name else [f.name for f in store.list_fleets()]
    if not name and (local_cloud_root(where.home) / "cloud.db").exists():
        from providers.local import LocalCloud

        cloud = LocalCloud.open(local_cloud_root(where.home), time_scale=None, seed=None)
        names += sorted({i.fleet for i in cloud.all_instances(alive_only=True) if i.fleet} - set(names))
    out = {}
    for fleet in names:
        record = store.find_fleet(fleet)
        out[fleet] = providers_of(where, record) if record is not None else local_providers(where)
    return out


def repair_fleet(store: StateStore, fleet: str, providers: dict[str, Provider], spec: FleetSpec | None) -> dict:
    """Reconcile ``fleet``'s record with what its providers run (by tag), under its lock; ``spec``
    also restores the spec. Returns the JSON-ready result ``fleet repair --json`` prints."""
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
