"""Shell completion of fleet names and instance ids (click's ``shell_complete=``).

A TAB must answer at once and never fail: a SQLite store is read directly, read-only, with
two small queries on the ``fleets`` and ``instances`` tables (``fleet/state/migrations``),
without importing the state package (pydantic models); any other store (PostgreSQL) through
``fleet.state``. Whatever goes wrong (no store yet, a locked or corrupt file) completes nothing.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import click
from click.shell_completion import CompletionItem

from fleet.cli.app import default_home


def _state_url(ctx: click.Context) -> str:
    """The store the command would use: ``--state``, ``$SPOTFLEET_STATE`` or ``<home>/state.db``
    (the root command's options are parsed before completion asks, ``ctx.obj`` is not built)."""
    root = ctx.find_root().params
    home = root.get("home") or default_home()
    return root.get("state") or os.environ.get("SPOTFLEET_STATE") or str(Path(home) / "state.db")


def _query(url: str, sql: str) -> list[str]:
    """The first column of ``sql`` on the SQLite store at ``url``; [] when there is none."""
    path = Path(url.removeprefix("sqlite://")).expanduser()
    if not path.is_file():
        return []
    try:
        with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=0.5) as db:
            return [str(row[0]) for row in db.execute(sql)]
    except sqlite3.Error:
        return []


def _from_store(url: str, instances: bool) -> list[str]:
    """Names (or alive instance ids) from a store that is not a SQLite file."""
    from fleet.state import open_store

    try:
        store = open_store(url, create=False, read_only=True)
    except Exception:  # noqa: BLE001 - a TAB never fails
        return []
    try:
        names = [r.name for r in store.list_fleets()]
        if not instances:
            return names
        return [r.id for n in names for r in store.instances(n, alive_only=True)]
    except Exception:  # noqa: BLE001
        return []
    finally:
        store.close()


def _values(ctx: click.Context, instances: bool) -> list[str]:
    url = _state_url(ctx)
    from_sqlite = url.startswith("sqlite:///") or "://" not in url
    if not from_sqlite:
        return _from_store(url, instances)
    if instances:
        return _query(url, "SELECT id FROM instances WHERE ended_at IS NULL ORDER BY id")
    return _query(url, "SELECT name FROM fleets ORDER BY name")


def fleet_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The recorded fleets whose name starts with what was typed."""
    return [CompletionItem(n) for n in _values(ctx, instances=False) if n.startswith(incomplete)]


def instance_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The ids of the recorded instances still running whose id starts with what was typed."""
    return [CompletionItem(i) for i in _values(ctx, instances=True) if i.startswith(incomplete)]
