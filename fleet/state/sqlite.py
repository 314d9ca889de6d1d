"""The embedded SQLite state store (WAL, busy timeout, one transaction per write).

Thread-safe: one connection guarded by a lock, so the executor's launch threads can
record results concurrently. Every sqlite error surfaces as ``StateError``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator, Sequence, TypeVar

from fleet.errors import FleetLockedError, FleetNotFoundError
from fleet.model import TAG_PLAN, Instance, Plan
from fleet.state import db, owner, rows
from fleet.state.records import (
    BlockRecord,
    EventRecord,
    FleetRecord,
    InstanceRecord,
    LaunchRecord,
    LaunchStatus,
    LockInfo,
)

T = TypeVar("T")
KIND_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
LOCK_TTL_SECONDS = 900.0


def _locked(fn: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(fn)
    def wrapper(self: "SQLiteStore", *args: Any, **kwargs: Any) -> T:
        with self._mutex, db.translated(self.path):
            return fn(self, *args, **kwargs)
    return wrapper


class SQLiteStore:
    """``StateStore`` on one SQLite file; see ``fleet.state.StateStore`` for the contract."""

    def __init__(self, path: Path, *, create: bool = True):
        self.path = path
        self.url = str(path)
        self._mutex = threading.RLock()
        self._conn = db.connect(path, create=create)

    def close(self) -> None:
        with self._mutex:
            self._conn.close()

    def verify(self) -> None:
        with self._mutex:
            db.verify(self._conn, self.path)

    @_locked
    def damage(self) -> list[rows.Damage]:
        return rows.damage(self._conn, self.path)

    @_locked
    def rebuild_rows(self, damage: Collection[rows.Damage]) -> None:
        """Drop each damaged row (``fleets`` rows keep their name and every readable column)."""
        with self._tx():
            for d in damage:
                if d.table != "fleets":
                    self._conn.execute(f"DELETE FROM {d.table} WHERE rowid = ?", (d.rowid,))
                    continue
                row = self._conn.execute("SELECT name, status, spec_json, spec_hash, backend, created_at, updated_at"
                                         " FROM fleets WHERE rowid = ?", (d.rowid,)).fetchone()
                if row is None or not isinstance(row[0], str):
                    self._conn.execute("DELETE FROM fleets WHERE rowid = ?", (d.rowid,))
                    continue
                self._conn.execute("UPDATE fleets SET status = ?, spec_json = ?, spec_hash = ?, backend = ?,"
                                   " created_at = ?, updated_at = ? WHERE rowid = ?",
                                   (*rows.fixed_fleet(row, time.time()), d.rowid))

    def _tx(self) -> contextlib.AbstractContextManager[Any]:
        return db.transaction(self._conn)

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, args).fetchall()

    # ---- fleets ----------------------------------------------------------------------
    @_locked
    def save_fleet(self, name: str, *, status: str, spec_json: str | None = None, spec_hash: str = "",
                   backend: str = "") -> FleetRecord:
        now = time.time()
        with self._tx():
            self._conn.execute(
                "INSERT INTO fleets (name, status, spec_json, spec_hash, backend, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET status = excluded.status,"
                " spec_json = COALESCE(excluded.spec_json, spec_json),"
                " spec_hash = CASE WHEN excluded.spec_json IS NULL THEN spec_hash ELSE excluded.spec_hash END,"
                " backend = CASE WHEN excluded.backend = '' THEN backend ELSE excluded.backend END,"
                " updated_at = excluded.updated_at",
                (name, status, spec_json, spec_hash, backend, now, now))
        return self.get_fleet(name)

    @_locked
    def set_status(self, name: str, status: str) -> None:
        with self._tx():
            cur = self._conn.execute("UPDATE fleets SET status = ?, updated_at = ? WHERE name = ?",
                                     (status, time.time(), name))
        if cur.rowcount == 0:
            raise self._not_found(name)

    @_locked
    def find_fleet(self, name: str) -> FleetRecord | None:
        rows = self._all("SELECT name, status, spec_json, spec_hash, backend, created_at, updated_at"
                         " FROM fleets WHERE name = ?", (name,))
        return self._fleet(rows[0]) if rows else None

    def get_fleet(self, name: str) -> FleetRecord:
        record = self.find_fleet(name)
        if record is None:
            raise self._not_found(name)
        return record

    def _not_found(self, name: str) -> FleetNotFoundError:
        known = [f.name for f in self.list_fleets()]
        hint = f"known fleets: {', '.join(known)}" if known else "no fleets are recorded yet"
        return FleetNotFoundError(f"no fleet named {name!r} in {self.path} ({hint}); "
                                  "create it with `fleet up SPEC`, or `fleet repair --spec SPEC` if it runs")

    @_locked
    def list_fleets(self) -> list[FleetRecord]:
        return [self._fleet(r) for r in self._all(
            "SELECT name, status, spec_json, spec_hash, backend, created_at, updated_at FROM fleets ORDER BY name")]

    def _fleet(self, row: tuple[Any, ...]) -> FleetRecord:
        return rows.record(FleetRecord, row, path=self.path, table="fleets", key=str(row[0])[:40],
                           fleet=row[0] if isinstance(row[0], str) else "")

    # ---- plans -----------------------------------------------------------------------
    @_locked
    def save_plan(self, plan: Plan) -> None:
        with self._tx():
            self._conn.execute("INSERT OR IGNORE INTO plans (fleet, id, body, created_at) VALUES (?, ?, ?, ?)",
                               (plan.fleet, plan.id, plan.to_json(), time.time()))

    @_locked
    def mark_plan_applied(self, fleet: str, plan_id: str) -> None:
        with self._tx():
            self._conn.execute("UPDATE plans SET applied_at = ? WHERE fleet = ? AND id = ?",
                               (time.time(), fleet, plan_id))

    @_locked
    def latest_plan(self, fleet: str, *, applied_only: bool = False) -> Plan | None:
        where = " AND applied_at IS NOT NULL" if applied_only else ""
        order = "applied_at" if applied_only else "created_at"
        found = self._all(f"SELECT id, body FROM plans WHERE fleet = ?{where} ORDER BY {order} DESC, rowid DESC"
                          " LIMIT 1", (fleet,))
        return rows.plan(found[0][1], path=self.path, fleet=fleet, plan_id=str(found[0][0])) if found else None

    # ---- launches --------------------------------------------------------------------
    @_locked
    def begin_launch(self, fleet: str, plan_id: str, pool: str, count: int,
                     token_for: Callable[[int], str]) -> LaunchRecord:
        """Allocate the next sequence number for (fleet, plan, pool) and record the launch
        with its token, committed before the caller talks to the provider."""
        with self._tx():
            row = self._conn.execute("SELECT COALESCE(MAX(seq), 0) FROM launches WHERE fleet = ? AND plan_id = ?"
                                     " AND pool = ?", (fleet, plan_id, pool)).fetchone()
            seq = int(row[0]) + 1
            cur = self._conn.execute(
                "INSERT INTO launches (fleet, plan_id, pool, seq, token, count, status, requested_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (fleet, plan_id, pool, seq, token_for(seq), count, LaunchStatus.REQUESTED, time.time()))
            launch_id = cur.lastrowid
        return self._launch(launch_id)

    @_locked
    def finish_launch(self, launch_id: int, *, status: str, launched: int, error_kind: str = "",
                      error_message: str = "") -> None:
        with self._tx():
            self._conn.execute("UPDATE launches SET status = ?, launched = ?, error_kind = ?, error_message = ?,"
                               " finished_at = ? WHERE id = ?",
                               (status, launched, error_kind, error_message, time.time(), launch_id))

    def _launch(self, launch_id: int | None) -> LaunchRecord:
        return self._launch_row(self._all(f"SELECT {_LAUNCH_COLS} FROM launches WHERE id = ?", (launch_id,))[0])

    def _launch_row(self, row: tuple[Any, ...]) -> LaunchRecord:
        return rows.record(LaunchRecord, row, path=self.path, table="launches", key=str(row[0]), fleet=str(row[1]))

    @_locked
    def launches(self, fleet: str, *, status: str | None = None) -> list[LaunchRecord]:
        where, args = ("AND status = ?", (fleet, status)) if status else ("", (fleet,))
        return [self._launch_row(r) for r in
                self._all(f"SELECT {_LAUNCH_COLS} FROM launches WHERE fleet = ? {where} ORDER BY id", args)]

    # ---- instances (cost accrual inputs) ---------------------------------------------
    @_locked
    def record_instances(self, fleet: str, instances: Iterable[Instance], *,
                         on_demand_prices: dict[str, float] | None = None, plan_id: str = "") -> int:
        """Insert instances not yet recorded (existing rows are kept); returns how many were new."""
        prices = on_demand_prices or {}
        rows = [(fleet, i.id, i.pool.id, i.pool.market.value, i.accelerator, i.gpus, i.price_per_hour,
                 prices.get(i.pool.id), i.launched_at, i.tags.get(TAG_PLAN, plan_id)) for i in instances]
        with self._tx():
            before = self._conn.total_changes
            self._conn.executemany(
                "INSERT OR IGNORE INTO instances (fleet, id, pool, market, accelerator, gpus, price_per_hour,"
                " on_demand_price, launched_at, plan_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            return self._conn.total_changes - before

    @_locked
    def end_instances(self, fleet: str, ended: dict[str, tuple[float, str]]) -> None:
        """Mark instances ended: ``{id: (ended_at, reason)}``; already-ended rows keep their first end."""
        with self._tx():
            self._conn.executemany(
                "UPDATE instances SET ended_at = ?, end_reason = ? WHERE fleet = ? AND id = ? AND ended_at IS NULL",
                [(ts, reason, fleet, iid) for iid, (ts, reason) in ended.items()])

    @_locked
    def instances(self, fleet: str, *, alive_only: bool = False) -> list[InstanceRecord]:
        where = " AND ended_at IS NULL" if alive_only else ""
        return [rows.record(InstanceRecord, r, path=self.path, table="instances", key=f"{fleet}/{str(r[1])[:40]}",
                            fleet=fleet) for r in self._all(
            f"SELECT {_INSTANCE_COLS} FROM instances WHERE fleet = ?{where} ORDER BY launched_at, id", (fleet,))]

    # ---- events ----------------------------------------------------------------------
    @_locked
    def record_event(self, fleet: str, kind: str, *, instance_id: str = "", pool: str = "",
                     detail: dict[str, Any] | None = None, ts: float | None = None) -> None:
        self.record_events([(fleet, kind, instance_id, pool, detail, ts)])

    @_locked
    def record_events(self, events: Iterable[tuple[str, str, str, str, dict[str, Any] | None, float | None]]) -> None:
        """Many events in one transaction: ``(fleet, kind, instance_id, pool, detail, ts)``."""
        rows = []
        for fleet, kind, instance_id, pool, detail, ts in events:
            if not KIND_RE.match(kind):
                raise ValueError(f"event kind {kind!r}: use lowercase letters, digits and dashes")
            rows.append((fleet, time.time() if ts is None else ts, kind, instance_id, pool,
                         json.dumps(detail or {}, sort_keys=True, default=str)))
        with self._tx():
            self._conn.executemany("INSERT INTO events (fleet, ts, kind, instance_id, pool, detail)"
                                   " VALUES (?, ?, ?, ?, ?, ?)", rows)

    @_locked
    def events(self, fleet: str, *, kinds: Collection[str] = ()) -> list[EventRecord]:
        where, args = "", [fleet]
        if kinds:
            where = f" AND kind IN ({', '.join('?' * len(kinds))})"
            args += list(kinds)
        return [rows.event(r, path=self.path) for r in self._all(
            f"SELECT id, fleet, ts, kind, instance_id, pool, detail FROM events WHERE fleet = ?{where}"
            " ORDER BY ts, id", args)]

    # ---- blocked pools ---------------------------------------------------------------
    @_locked
    def block(self, prefix: str, *, until: float, reason: str) -> None:
        """Block a pool-id prefix until ``until``; an existing longer block is kept."""
        with self._tx():
            self._conn.execute(
                "INSERT INTO blocked_pools (prefix, until, reason, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(prefix) DO UPDATE SET reason = excluded.reason, until = MAX(until, excluded.until)",
                (prefix, until, reason, time.time()))

    @_locked
    def blocks(self) -> list[BlockRecord]:
        return [rows.record(BlockRecord, r, path=self.path, table="blocked_pools", key=str(r[0])[:60])
                for r in self._all("SELECT prefix, until, reason, created_at FROM blocked_pools ORDER BY prefix")]

    @_locked
    def unblock(self, prefixes: Collection[str]) -> None:
        with self._tx():
            self._conn.executemany("DELETE FROM blocked_pools WHERE prefix = ?", [(p,) for p in prefixes])

    # ---- per-fleet lock --------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, fleet: str, command: str, *, ttl: float = LOCK_TTL_SECONDS) -> Iterator[LockInfo]:
        """Hold ``fleet``'s lock for the block; raises ``FleetLockedError`` naming the holder."""
        info = self.acquire_lock(fleet, command, ttl=ttl)
        try:
            yield info
        finally:
            self.release_lock(fleet)

    @_locked
    def acquire_lock(self, fleet: str, command: str, *, ttl: float = LOCK_TTL_SECONDS) -> LockInfo:
        me, pid, host = owner.current_owner()
        now = time.time()
        with self._tx():
            row = self._conn.execute(f"SELECT {_LOCK_COLS} FROM locks WHERE fleet = ?", (fleet,)).fetchone()
            if row is not None:
                held = self._lock_info(row)
                if (held is not None and held.owner != me and held.expires_at > now
                        and owner.is_alive(held.owner) is not False):
                    raise FleetLockedError(
                        f"fleet {fleet!r} is busy: {held.describe()} holds its lock since "
                        f"{time.strftime('%H:%M:%S', time.localtime(held.acquired_at))}; wait for it to finish "
                        f"(a lock of a vanished process expires at "
                        f"{time.strftime('%H:%M:%S', time.localtime(held.expires_at))})")
            self._conn.execute(
                "INSERT OR REPLACE INTO locks (fleet, owner, pid, host, command, acquired_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)", (fleet, me, pid, host, command, now, now + ttl))
        return LockInfo(fleet, me, pid, host, command, now, now + ttl)

    @_locked
    def refresh_lock(self, fleet: str, *, ttl: float = LOCK_TTL_SECONDS) -> None:
        """Extend this process's lease; ``FleetLockedError`` if another process took the lock over
        (ours expired), so the caller stops instead of acting beside it."""
        me = owner.current_owner()[0]
        with self._tx():
            row = self._conn.execute(f"SELECT {_LOCK_COLS} FROM locks WHERE fleet = ?", (fleet,)).fetchone()
            if row is None or row[1] == me:
                self._conn.execute("UPDATE locks SET expires_at = ? WHERE fleet = ? AND owner = ?",
                                   (time.time() + ttl, fleet, me))
                return
        held = self._lock_info(row)
        raise FleetLockedError(f"fleet {fleet!r}: this command's lock expired and "
                               f"{held.describe() if held else 'another command'} "
                               "took it over; stopping here")

    @_locked
    def release_lock(self, fleet: str) -> None:
        with self._tx():
            self._conn.execute("DELETE FROM locks WHERE fleet = ? AND owner = ?", (fleet, owner.current_owner()[0]))

    @_locked
    def lock_holder(self, fleet: str) -> LockInfo | None:
        row = self._conn.execute(f"SELECT {_LOCK_COLS} FROM locks WHERE fleet = ?", (fleet,)).fetchone()
        return self._lock_info(row) if row else None

    def _lock_info(self, row: tuple[Any, ...]) -> LockInfo | None:
        """The lock row, or ``None`` when it is damaged (a lock nobody can read is taken over)."""
        try:
            return rows.record(LockInfo, row, path=self.path, table="locks", key=str(row[0]))
        except rows.DamagedRowError:
            return None


_LAUNCH_COLS = ("id, fleet, plan_id, pool, seq, token, count, status, launched, error_kind, error_message,"
                " requested_at, finished_at")
_INSTANCE_COLS = ("fleet, id, pool, market, accelerator, gpus, price_per_hour, launched_at, on_demand_price,"
                  " ended_at, end_reason, plan_id")
_LOCK_COLS = "fleet, owner, pid, host, command, acquired_at, expires_at"
