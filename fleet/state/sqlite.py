"""The embedded SQLite state store (WAL, busy timeout, one transaction per write).

Thread-safe: one connection guarded by a lock, so the executor's launch threads can
record results concurrently. Every sqlite error surfaces as ``StateError``. The store's
logic is ``fleet.state.sql.SQLStore``'s; what is SQLite's own is here: opening and
migrating the file (``fleet.state.db``), ``BEGIN IMMEDIATE`` write transactions (which
also serialise launches and lock takeovers), and finding and rebuilding damaged rows.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from fleet.state import db, rows
from fleet.state.sql import FLEET_COLS, KIND_RE, LOCK_TTL_SECONDS, SQLStore, guarded

__all__ = ["KIND_RE", "LOCK_TTL_SECONDS", "SQLiteStore"]


class SQLiteStore(SQLStore):
    """``StateStore`` on one SQLite file; see ``fleet.state.StateStore`` for the contract."""

    _IGNORE = ("INSERT OR IGNORE", "")
    _GREATEST = "MAX"
    _PLAN_ORDER = "rowid"

    def __init__(self, path: Path, *, create: bool = True, read_only: bool = False):
        super().__init__(str(path))
        self.path = path
        self.read_only = read_only
        self._conn = db.connect(path, create=create and not read_only, read_only=read_only)

    def _errors(self) -> contextlib.AbstractContextManager[Any]:
        return db.translated(self.path)

    def _exec(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._conn.execute(sql, args)

    def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        return int(self._conn.executemany(sql, rows).rowcount)

    def _insert_id(self, sql: str, args: Sequence[Any]) -> int:
        return int(self._conn.execute(sql, args).lastrowid)

    def _tx(self) -> contextlib.AbstractContextManager[Any]:
        return db.transaction(self._conn)

    @guarded
    def verify(self) -> None:
        db.verify(self._conn, self.path)

    @guarded
    def damage(self) -> list[rows.Damage]:
        return rows.damage(self._conn, self.path)

    @guarded
    def rebuild_rows(self, damage: Collection[rows.Damage]) -> None:
        """Drop each damaged row (``fleets`` rows keep their name and every readable column)."""
        with self._tx():
            for d in damage:
                if d.table != "fleets":
                    self._exec(f"DELETE FROM {d.table} WHERE rowid = ?", (d.rowid,))
                    continue
                row = self._exec(f"SELECT {FLEET_COLS} FROM fleets WHERE rowid = ?", (d.rowid,)).fetchone()
                if row is None or not isinstance(row[0], str):
                    self._exec("DELETE FROM fleets WHERE rowid = ?", (d.rowid,))
                    continue
                self._exec(
                    "UPDATE fleets SET status = ?, spec_json = ?, spec_hash = ?, backend = ?,"
                    " created_at = ?, updated_at = ? WHERE rowid = ?",
                    (*rows.fixed_fleet(row, time.time()), d.rowid),
                )
