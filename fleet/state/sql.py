"""The ``StateStore`` logic both backends share, written once over a few primitives.

``SQLStore`` holds every method whose logic is the same on SQLite and PostgreSQL; a backend
(``fleet.state.sqlite``, ``fleet.state.postgres``) supplies only what really differs:

- ``_conn`` and ``_errors()``: the connection, and a context that turns its driver's errors
  into ``StateError`` (every public method runs under ``guarded``: the connection's mutex,
  then ``_errors()``);
- ``_exec(sql, args)`` and ``_many(sql, rows)``: run one statement (returning the cursor) or
  one statement over many rows (returning the rows changed). SQL here is written with ``?``
  placeholders in the dialect both servers accept; a backend rewrites the placeholders into
  its own style (no statement holds a literal ``?`` or ``%``);
- ``_insert_id(sql, args)``: run an ``INSERT`` and return the new row's ``id``;
- ``_tx()``: a transaction; ``_write()``: what one write statement runs in (a transaction
  unless the connection commits each statement on its own);
- ``_serialise(key)``: inside a transaction, wait until no other transaction holds ``key``
  (a no-op where a write transaction already excludes every other writer);
- ``_lock_clock()``: the clock lock leases are taken on (one shared clock for all holders);
- ``_IGNORE`` (how an ``INSERT`` skips rows already there), ``_GREATEST`` (the two-argument
  maximum) and ``_PLAN_ORDER`` (the column that orders plans saved in the same instant).

Every row read passes through ``fleet.state.rows``, so a row holding garbage raises
``DamagedRowError`` naming its table, row and ``fleet repair``. Every column that may hold
provider text (a launch's error, an instance's end reason, a block's reason, the strings of an
event's detail) is written through ``fleet.safetext``: one line, escaped, secrets masked, so a
shared store never keeps a credential a provider echoed.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from fleet.errors import FleetLockedError, FleetNotFoundError
from fleet.model import TAG_PLAN, BilledRate, Instance, Plan, PlanDigest
from fleet.safetext import safe, safe_data
from fleet.state import owner, rows
from fleet.state.heartbeat import Heartbeat
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
#: A lock's lease: it expires this long after its holder's last heartbeat (one every
#: ``HEARTBEAT_SECONDS`` while ``lock()`` is held), unless the holder is judged dead sooner.
LOCK_TTL_SECONDS = 300.0
HEARTBEAT_SECONDS = 30.0

FLEET_COLS = rows.SCANS["fleets"][0]
LAUNCH_COLS = rows.SCANS["launches"][0]
INSTANCE_COLS = rows.SCANS["instances"][0]
BLOCK_COLS = rows.SCANS["blocked_pools"][0]
LOCK_COLS = rows.SCANS["locks"][0]
EVENT_COLS = rows.SCANS["events"][0]


def guarded(fn: Callable[..., T]) -> Callable[..., T]:
    """Serialise calls on the store's one connection and turn driver errors into ``StateError``."""

    @functools.wraps(fn)
    def wrapper(self: SQLStore, *args: Any, **kwargs: Any) -> T:
        with self._mutex, self._errors():
            return fn(self, *args, **kwargs)

    return wrapper


class SQLStore:
    """``StateStore`` over one SQL connection; see ``fleet.state.StateStore`` for the contract.

    Thread-safe: the connection is guarded by a re-entrant lock, so the executor's launch
    threads can record results concurrently.
    """

    read_only = False
    _IGNORE: tuple[str, str]
    _GREATEST: str
    _PLAN_ORDER: str
    _conn: Any

    def __init__(self, url: str):
        self.url = url
        self._mutex = threading.RLock()
        self._held: dict[str, int] = {}  # fleet -> how deep this store's lock() blocks nest

    # ---- primitives a backend supplies -----------------------------------------------
    def _errors(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _exec(self, sql: str, args: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        raise NotImplementedError

    def _insert_id(self, sql: str, args: Sequence[Any]) -> int:
        raise NotImplementedError

    def _tx(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _write(self) -> contextlib.AbstractContextManager[Any]:
        return self._tx()

    def _serialise(self, key: str) -> None:
        """No other writer runs beside a transaction here, so there is nothing to wait for."""

    def _lock_clock(self) -> float:
        return time.time()

    # ---- shared plumbing -------------------------------------------------------------
    def close(self) -> None:
        with self._mutex:
            self._conn.close()

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._exec(sql, args).fetchall())

    def _insert(self, table: str, cols: str, *, ignore: bool = False, conflict: str = "") -> str:
        """``INSERT INTO table (cols) VALUES (?, ...)``; ``ignore`` skips rows already there."""
        verb, tail = self._IGNORE if ignore else ("INSERT", "")
        marks = ", ".join("?" * len(cols.split(",")))
        return f"{verb} INTO {table} ({cols}) VALUES ({marks}){tail}{conflict}"

    # ---- fleets ----------------------------------------------------------------------
    @guarded
    def save_fleet(
        self, name: str, *, status: str, spec_json: str | None = None, spec_hash: str = "", backend: str = ""
    ) -> FleetRecord:
        now = time.time()
        with self._write():
            self._exec(
                self._insert(
                    "fleets",
                    FLEET_COLS,
                    conflict=" ON CONFLICT (name) DO UPDATE SET status = excluded.status,"
                    " spec_json = COALESCE(excluded.spec_json, fleets.spec_json),"
                    " spec_hash = CASE WHEN excluded.spec_json IS NULL THEN fleets.spec_hash ELSE excluded.spec_hash END,"
                    " backend = CASE WHEN excluded.backend = '' THEN fleets.backend ELSE excluded.backend END,"
                    " updated_at = excluded.updated_at",
                ),
                (name, status, spec_json, spec_hash, backend, now, now),
            )
        return self.get_fleet(name)

    @guarded
    def set_status(self, name: str, status: str) -> None:
        with self._write():
            cur = self._exec("UPDATE fleets SET status = ?, updated_at = ? WHERE name = ?", (status, time.time(), name))
        if cur.rowcount == 0:
            raise self._not_found(name)

    @guarded
    def find_fleet(self, name: str) -> FleetRecord | None:
        found = self._all(f"SELECT {FLEET_COLS} FROM fleets WHERE name = ?", (name,))
        return self._fleet(found[0]) if found else None

    def get_fleet(self, name: str) -> FleetRecord:
        record = self.find_fleet(name)
        if record is None:
            raise self._not_found(name)
        return record

    def _not_found(self, name: str) -> FleetNotFoundError:
        known = [f.name for f in self.list_fleets()]
        hint = f"known fleets: {', '.join(known)}" if known else "no fleets are recorded yet"
        return FleetNotFoundError(
            f"no fleet named {name!r} in {self.url} ({hint}); "
            "create it with `fleet up SPEC`, or `fleet repair --spec SPEC` if it runs"
        )

    @guarded
    def list_fleets(self) -> list[FleetRecord]:
        return [self._fleet(r) for r in self._all(f"SELECT {FLEET_COLS} FROM fleets ORDER BY name")]

    def _fleet(self, row: tuple[Any, ...]) -> FleetRecord:
        return rows.record(
            FleetRecord,
            row,
            path=self.url,
            table="fleets",
            key=str(row[0])[:40],
            fleet=row[0] if isinstance(row[0], str) else "",
        )

    # ---- plans -----------------------------------------------------------------------
    @guarded
    def save_plan(self, plan: Plan) -> None:
        with self._write():
            self._exec(
                self._insert("plans", "fleet, id, body, created_at", ignore=True),
                (plan.fleet, plan.id, plan.to_json(), time.time()),
            )

    @guarded
    def mark_plan_applied(self, fleet: str, plan_id: str) -> None:
        with self._write():
            self._exec("UPDATE plans SET applied_at = ? WHERE fleet = ? AND id = ?", (time.time(), fleet, plan_id))

    @guarded
    def latest_plan(self, fleet: str, *, applied_only: bool = False) -> Plan | None:
        found = self._latest_plan_row(fleet, applied_only)
        return rows.plan(found[1], path=self.url, fleet=fleet, plan_id=str(found[0])) if found else None

    @guarded
    def latest_plan_digest(self, fleet: str, *, applied_only: bool = False) -> PlanDigest | None:
        found = self._latest_plan_row(fleet, applied_only)
        return rows.plan_digest(found[1], path=self.url, fleet=fleet, plan_id=str(found[0])) if found else None

    def _latest_plan_row(self, fleet: str, applied_only: bool) -> tuple[Any, Any] | None:
        """(id, body) of the fleet's latest plan (latest applied with ``applied_only``), None if none."""
        where = " AND applied_at IS NOT NULL" if applied_only else ""
        order = "applied_at" if applied_only else "created_at"
        found = self._all(
            f"SELECT id, body FROM plans WHERE fleet = ?{where} ORDER BY {order} DESC, {self._PLAN_ORDER} DESC LIMIT 1",
            (fleet,),
        )
        return (found[0][0], found[0][1]) if found else None

    @guarded
    def applied_plans(self, fleet: str, *, limit: int = 20) -> list[tuple[Plan, float]]:
        found = self._all(
            "SELECT id, body, applied_at FROM plans WHERE fleet = ? AND applied_at IS NOT NULL"
            f" ORDER BY applied_at DESC, {self._PLAN_ORDER} DESC LIMIT ?",
            (fleet, limit),
        )
        return [
            (rows.plan(body, path=self.url, fleet=fleet, plan_id=str(pid)), float(at))
            for pid, body, at in reversed(found)
        ]

    # ---- launches --------------------------------------------------------------------
    @guarded
    def begin_launch(
        self, fleet: str, plan_id: str, pool: str, count: int, token_for: Callable[[int], str]
    ) -> LaunchRecord:
        """Allocate the next sequence number for (fleet, plan, pool) and record the launch
        with its token, committed before the caller talks to the provider (one writer per
        pool at a time)."""
        with self._tx():
            self._serialise(f"launch|{fleet}|{plan_id}|{pool}")
            seq = (
                int(
                    self._all(
                        "SELECT COALESCE(MAX(seq), 0) FROM launches WHERE fleet = ? AND plan_id = ? AND pool = ?",
                        (fleet, plan_id, pool),
                    )[0][0]
                )
                + 1
            )
            launch_id = self._insert_id(
                self._insert("launches", "fleet, plan_id, pool, seq, token, count, status, requested_at"),
                (fleet, plan_id, pool, seq, token_for(seq), count, LaunchStatus.REQUESTED, time.time()),
            )
        return self._launch_row(self._all(f"SELECT {LAUNCH_COLS} FROM launches WHERE id = ?", (launch_id,))[0])

    @guarded
    def finish_launch(
        self, launch_id: int, *, status: str, launched: int, error_kind: str = "", error_message: str = ""
    ) -> None:
        with self._write():
            self._exec(
                "UPDATE launches SET status = ?, launched = ?, error_kind = ?, error_message = ?,"
                " finished_at = ? WHERE id = ?",
                (status, launched, safe(error_kind), safe(error_message), time.time(), launch_id),
            )

    def _launch_row(self, row: tuple[Any, ...]) -> LaunchRecord:
        return rows.record(LaunchRecord, row, path=self.url, table="launches", key=str(row[0]), fleet=str(row[1]))

    @guarded
    def launches(self, fleet: str, *, status: str | None = None) -> list[LaunchRecord]:
        where, args = ("AND status = ?", (fleet, status)) if status else ("", (fleet,))
        return [
            self._launch_row(r)
            for r in self._all(f"SELECT {LAUNCH_COLS} FROM launches WHERE fleet = ? {where} ORDER BY id", args)
        ]

    # ---- instances (cost accrual inputs) ---------------------------------------------
    @guarded
    def record_instances(
        self,
        fleet: str,
        instances: Iterable[Instance],
        *,
        on_demand_prices: dict[str, float] | None = None,
        plan_id: str = "",
    ) -> int:
        """Insert instances not yet recorded (existing rows are kept); returns how many were new."""
        prices = on_demand_prices or {}
        new = [
            (
                fleet,
                i.id,
                i.pool.id,
                i.pool.market.value,
                i.accelerator,
                i.gpus,
                i.price_per_hour,
                prices.get(i.pool.id),
                i.launched_at,
                i.tags.get(TAG_PLAN, plan_id),
            )
            for i in instances
        ]
        with self._tx():
            return self._many(
                self._insert(
                    "instances",
                    "fleet, id, pool, market, accelerator, gpus, price_per_hour, on_demand_price, launched_at, plan_id",
                    ignore=True,
                ),
                new,
            )

    @guarded
    def end_instances(self, fleet: str, ended: dict[str, tuple[float, str]]) -> None:
        """Mark instances ended: ``{id: (ended_at, reason)}``; already-ended rows keep their first end."""
        with self._tx():
            self._many(
                "UPDATE instances SET ended_at = ?, end_reason = ? WHERE fleet = ? AND id = ? AND ended_at IS NULL",
                [(ts, safe(reason), fleet, iid) for iid, (ts, reason) in ended.items()],
            )

    @guarded
    def record_billed(self, fleet: str, rates: dict[str, BilledRate]) -> None:
        """Each instance's billed rate, its source and rental kind (provider text: made safe)."""
        if not rates:
            return
        with self._tx():
            self._many(
                "UPDATE instances SET billed_per_hour = ?, billed_source = ?, rental = ? WHERE fleet = ? AND id = ?",
                [(r.per_hour, safe(r.source), safe(r.rental), fleet, iid) for iid, r in sorted(rates.items())],
            )

    @guarded
    def instances(self, fleet: str, *, alive_only: bool = False) -> list[InstanceRecord]:
        where = " AND ended_at IS NULL" if alive_only else ""
        return [
            rows.record(
                InstanceRecord, r, path=self.url, table="instances", key=f"{fleet}/{str(r[1])[:40]}", fleet=fleet
            )
            for r in self._all(
                f"SELECT {INSTANCE_COLS} FROM instances WHERE fleet = ?{where} ORDER BY launched_at, id", (fleet,)
            )
        ]

    # ---- events ----------------------------------------------------------------------
    @guarded
    def record_event(
        self,
        fleet: str,
        kind: str,
        *,
        instance_id: str = "",
        pool: str = "",
        detail: dict[str, Any] | None = None,
        ts: float | None = None,
    ) -> None:
        self.record_events([(fleet, kind, instance_id, pool, detail, ts)])

    @guarded
    def record_events(self, events: Iterable[tuple[str, str, str, str, dict[str, Any] | None, float | None]]) -> None:
        """Many events in one transaction: ``(fleet, kind, instance_id, pool, detail, ts)``."""
        new = []
        for fleet, kind, instance_id, pool, detail, ts in events:
            if not KIND_RE.match(kind):
                raise ValueError(f"event kind {kind!r}: use lowercase letters, digits and dashes")
            new.append(
                (
                    fleet,
                    time.time() if ts is None else ts,
                    kind,
                    instance_id,
                    pool,
                    json.dumps(safe_data(detail or {}), sort_keys=True, default=str),
                )
            )
        if not new:
            return
        with self._tx():
            self._many(self._insert("events", "fleet, ts, kind, instance_id, pool, detail"), new)

    @guarded
    def events(self, fleet: str, *, kinds: Collection[str] = ()) -> list[EventRecord]:
        where, args = "", [fleet]
        if kinds:
            where = f" AND kind IN ({', '.join('?' * len(kinds))})"
            args += list(kinds)
        return [
            rows.event(r, path=self.url)
            for r in self._all(f"SELECT {EVENT_COLS} FROM events WHERE fleet = ?{where} ORDER BY ts, id", args)
        ]

    # ---- blocked pools ---------------------------------------------------------------
    @guarded
    def block(self, prefix: str, *, until: float, reason: str) -> None:
        """Block a pool-id prefix until ``until``; an existing longer block is kept."""
        with self._write():
            self._exec(
                self._insert(
                    "blocked_pools",
                    BLOCK_COLS,
                    conflict=" ON CONFLICT (prefix) DO UPDATE SET reason = excluded.reason,"
                    f" until = {self._GREATEST}(blocked_pools.until, excluded.until)",
                ),
                (prefix, until, safe(reason), time.time()),
            )

    @guarded
    def blocks(self) -> list[BlockRecord]:
        return [
            rows.record(BlockRecord, r, path=self.url, table="blocked_pools", key=str(r[0])[:60])
            for r in self._all(f"SELECT {BLOCK_COLS} FROM blocked_pools ORDER BY prefix")
        ]

    @guarded
    def unblock(self, prefixes: Collection[str]) -> None:
        with self._tx():
            self._many("DELETE FROM blocked_pools WHERE prefix = ?", [(p,) for p in prefixes])

    # ---- per-fleet lock (a leased row) ------------------------------------------------
    # The row names its owner (``fleet.state.owner``: host, pid, namespace and a random token)
    # and when its lease expires; a holder renews the lease with a heartbeat. Another command
    # takes the lock over when the lease expired, or at once when the owner is in its own PID
    # namespace and is dead; a holder it cannot judge (another host or namespace) keeps it.
    @contextlib.contextmanager
    def lock(self, fleet: str, command: str, *, ttl: float = LOCK_TTL_SECONDS) -> Iterator[LockInfo]:
        """Hold ``fleet``'s lock for the block, its lease renewed by a heartbeat every
        ``min(HEARTBEAT_SECONDS, ttl / 4)``; raises ``FleetLockedError`` naming the holder. A
        nested ``lock()`` of the same fleet on this store is the same hold."""
        info = self.acquire_lock(fleet, command, ttl=ttl)
        if self._held.get(fleet):
            self._held[fleet] += 1
            try:
                yield info
            finally:
                self._held[fleet] -= 1
            return
        self._held[fleet] = 1
        beat = Heartbeat(lambda: self.refresh_lock(fleet, ttl=ttl), min(HEARTBEAT_SECONDS, ttl / 4))
        try:
            yield info
        finally:
            beat.stop()
            self._held.pop(fleet, None)
            self.release_lock(fleet)

    @guarded
    def acquire_lock(self, fleet: str, command: str, *, ttl: float = LOCK_TTL_SECONDS) -> LockInfo:
        """Take ``fleet``'s lock unless a live process holds an unexpired lease on it (a holder
        on another host counts as alive until its lease expires)."""
        me, pid, host = owner.current_owner()
        with self._tx():
            self._serialise(f"lock|{fleet}")
            now = self._lock_clock()
            found = self._all(f"SELECT {LOCK_COLS} FROM locks WHERE fleet = ?", (fleet,))
            held = self._lock_info(found[0]) if found else None
            if (
                held is not None
                and held.owner != me
                and held.expires_at > now
                and owner.is_alive(held.owner) is not False
            ):
                raise FleetLockedError(
                    f"fleet {fleet!r} is busy: {held.describe()} holds its lock since "
                    f"{time.strftime('%H:%M:%S', time.localtime(held.acquired_at))}; wait for it to finish "
                    f"(a lock of a vanished process expires at "
                    f"{time.strftime('%H:%M:%S', time.localtime(held.expires_at))})"
                )
            self._exec(
                self._insert(
                    "locks",
                    LOCK_COLS,
                    conflict=" ON CONFLICT (fleet) DO UPDATE SET owner = excluded.owner, pid = excluded.pid,"
                    " host = excluded.host, command = excluded.command, acquired_at = excluded.acquired_at,"
                    " expires_at = excluded.expires_at",
                ),
                (fleet, me, pid, host, command, now, now + ttl),
            )
        return LockInfo(fleet, me, pid, host, command, now, now + ttl)

    @guarded
    def refresh_lock(self, fleet: str, *, ttl: float = LOCK_TTL_SECONDS) -> None:
        """Extend this process's lease; ``FleetLockedError`` if another process took the lock over
        (ours expired), so the caller stops instead of acting beside it."""
        me = owner.current_owner()[0]
        with self._tx():
            self._serialise(f"lock|{fleet}")
            found = self._all(f"SELECT {LOCK_COLS} FROM locks WHERE fleet = ?", (fleet,))
            if not found or found[0][1] == me:
                self._exec(
                    "UPDATE locks SET expires_at = ? WHERE fleet = ? AND owner = ?",
                    (self._lock_clock() + ttl, fleet, me),
                )
                return
        held = self._lock_info(found[0])
        raise FleetLockedError(
            f"fleet {fleet!r}: this command's lock expired and "
            f"{held.describe() if held else 'another command'} "
            "took it over; stopping here"
        )

    @guarded
    def release_lock(self, fleet: str) -> None:
        with self._write():
            self._exec("DELETE FROM locks WHERE fleet = ? AND owner = ?", (fleet, owner.current_owner()[0]))

    @guarded
    def lock_holder(self, fleet: str) -> LockInfo | None:
        found = self._all(f"SELECT {LOCK_COLS} FROM locks WHERE fleet = ?", (fleet,))
        return self._lock_info(found[0]) if found else None

    def _lock_info(self, row: tuple[Any, ...]) -> LockInfo | None:
        """The lock row, or ``None`` when it is damaged (a lock nobody can read is taken over)."""
        try:
            return rows.record(LockInfo, row, path=self.url, table="locks", key=str(row[0]))
        except rows.DamagedRowError:
            return None
