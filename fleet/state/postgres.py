"""``StateStore`` on PostgreSQL, for teams sharing fleets and a rebalancer running elsewhere.

Selected by a ``postgresql://`` (or ``postgres://``) URL: ``--state URL`` or
``$SPOTFLEET_STATE``. Same contract as the SQLite store (``fleet.state.StateStore``); the
schema is migrated on open (``fleet.state.migrations.postgres``, serialised by an advisory
lock so two machines opening a fresh database do not race).

The fleet lock holds across machines: a ``locks`` row with a lease, taken and refreshed
inside a transaction that first holds ``pg_advisory_xact_lock`` for that fleet, with lease
times on the database server's clock (no skew between machines). A holder on another host
is taken for alive until its lease expires; on the same host a dead holder is taken over
at once, as with SQLite. Needs the ``postgres`` extra (``psycopg``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
import time
from typing import Any, Callable, Collection, Iterable, Iterator, Sequence, TypeVar
from urllib.parse import urlsplit, urlunsplit

from fleet.errors import FleetLockedError, FleetNotFoundError, StateError
from fleet.model import TAG_PLAN, Instance, Plan
from fleet.state import owner
from fleet.state.db import REPAIR_HINT
from fleet.state.migrations.postgres import MIGRATIONS
from fleet.state.records import BlockRecord, EventRecord, FleetRecord, InstanceRecord, LaunchRecord, LaunchStatus, LockInfo

T = TypeVar("T")
KIND_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
LOCK_TTL_SECONDS = 900.0
SCHEMES = ("postgresql://", "postgres://")
_FLEET_COLS = "name, status, spec_json, spec_hash, backend, created_at, updated_at"
_LAUNCH_COLS = ("id, fleet, plan_id, pool, seq, token, count, status, launched, error_kind, error_message,"
                " requested_at, finished_at")
_INSTANCE_COLS = ("fleet, id, pool, market, accelerator, gpus, price_per_hour, launched_at, on_demand_price,"
                  " ended_at, end_reason, plan_id")
_LOCK_COLS = "fleet, owner, pid, host, command, acquired_at, expires_at"
_TABLES = ("fleets", "plans", "launches", "instances", "events", "blocked_pools", "locks")


def is_postgres_url(url: str) -> bool:
    return url.startswith(SCHEMES)


def redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


def _translated(fn: Callable[..., T]) -> Callable[..., T]:
    """Serialise calls on the one connection and turn driver errors into ``StateError``."""
    @functools.wraps(fn)
    def wrapper(self: "PostgresStore", *args: Any, **kwargs: Any) -> T:
        import psycopg

        with self._mutex:
            try:
                return fn(self, *args, **kwargs)
            except psycopg.errors.UndefinedTable as err:
                raise StateError(f"state store {self.url} is damaged ({err.diag.message_primary}); "
                                 f"{REPAIR_HINT}") from None
            except psycopg.OperationalError as err:
                raise StateError(f"cannot reach the state store {self.url}: {str(err).strip()}") from None
            except psycopg.Error as err:
                raise StateError(f"state store {self.url}: {str(err).strip()}") from None
    return wrapper


class PostgresStore:
    """``StateStore`` on one PostgreSQL database; see ``fleet.state.StateStore`` for the contract."""

    def __init__(self, url: str, *, create: bool = True):
        try:
            import psycopg
        except ImportError:
            raise StateError("a postgresql:// state store needs psycopg: pip install 'spotfleet[postgres]'") from None
        self.url = redacted(url)
        self._mutex = threading.RLock()
        try:
            self._conn = psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True,
                                         connect_timeout=10)
        except psycopg.Error as err:
            raise StateError(f"cannot open the state store {self.url}: {str(err).strip()}") from None
        try:
            self._migrate(create)
        except BaseException:
            self._conn.close()
            raise

    # ---- plumbing --------------------------------------------------------------------
    def close(self) -> None:
        with self._mutex:
            self._conn.close()

    def _tx(self) -> contextlib.AbstractContextManager[Any]:
        return self._conn.transaction()

    def _all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, args).fetchall()

    def _server_now(self) -> float:
        return float(self._all("SELECT extract(epoch from clock_timestamp())")[0][0])

    @_translated
    def _migrate(self, create: bool) -> None:
        have = {r[0] for r in self._all("SELECT table_name FROM information_schema.tables"
                                        " WHERE table_schema = current_schema()")}
        if "schema_version" not in have:
            if "fleets" in have:
                raise StateError(f"{self.url} holds a `fleets` table but is not a spotfleet state store; "
                                 "point --state at another database")
            if not create:
                raise StateError(f"no state store at {self.url}: create a fleet with `fleet up SPEC`, or {REPAIR_HINT}")
        latest = max(MIGRATIONS)
        with self._tx():
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext('spotfleet-migrate'))")
            self._conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = self._all("SELECT version FROM schema_version")
            if not row:
                self._conn.execute("INSERT INTO schema_version VALUES (0)")
            current = int(row[0][0]) if row else 0
            if current > latest:
                raise StateError(f"state store {self.url} has schema v{current}, newer than this spotfleet knows "
                                 f"(v{latest}); upgrade spotfleet")
            for version in range(current + 1, latest + 1):
                for step in MIGRATIONS[version]:
                    self._conn.execute(step)
                self._conn.execute("UPDATE schema_version SET version = %s", (version,))

    @_translated
    def verify(self) -> None:
        for table in _TABLES:
            self._all(f"SELECT COUNT(*) FROM {table}")

    # ---- fleets ----------------------------------------------------------------------
    @_translated
    def save_fleet(self, name: str, *, status: str, spec_json: str | None = None, spec_hash: str = "",
                   backend: str = "") -> FleetRecord:
        now = time.time()
        self._conn.execute(
            f"INSERT INTO fleets ({_FLEET_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (name) DO UPDATE SET status = excluded.status,"
            " spec_json = COALESCE(excluded.spec_json, fleets.spec_json),"
            " spec_hash = CASE WHEN excluded.spec_json IS NULL THEN fleets.spec_hash ELSE excluded.spec_hash END,"
            " backend = CASE WHEN excluded.backend = '' THEN fleets.backend ELSE excluded.backend END,"
            " updated_at = excluded.updated_at",
            (name, status, spec_json, spec_hash, backend, now, now))
        return self.get_fleet(name)

    @_translated
    def set_status(self, name: str, status: str) -> None:
        cur = self._conn.execute("UPDATE fleets SET status = %s, updated_at = %s WHERE name = %s",
                                 (status, time.time(), name))
        if cur.rowcount == 0:
            raise self._not_found(name)

    @_translated
    def find_fleet(self, name: str) -> FleetRecord | None:
        rows = self._all(f"SELECT {_FLEET_COLS} FROM fleets WHERE name = %s", (name,))
        return FleetRecord(*rows[0]) if rows else None

    def get_fleet(self, name: str) -> FleetRecord:
        record = self.find_fleet(name)
        if record is None:
            raise self._not_found(name)
        return record

    def _not_found(self, name: str) -> FleetNotFoundError:
        known = [f.name for f in self.list_fleets()]
        hint = f"known fleets: {', '.join(known)}" if known else "no fleets are recorded yet"
        return FleetNotFoundError(f"no fleet named {name!r} in {self.url} ({hint}); "
                                  "create it with `fleet up SPEC`, or `fleet repair --spec SPEC` if it runs")

    @_translated
    def list_fleets(self) -> list[FleetRecord]:
        return [FleetRecord(*r) for r in self._all(f"SELECT {_FLEET_COLS} FROM fleets ORDER BY name")]

    # ---- plans -----------------------------------------------------------------------
    @_translated
    def save_plan(self, plan: Plan) -> None:
        self._conn.execute("INSERT INTO plans (fleet, id, body, created_at) VALUES (%s, %s, %s, %s)"
                           " ON CONFLICT DO NOTHING", (plan.fleet, plan.id, plan.to_json(), time.time()))

    @_translated
    def mark_plan_applied(self, fleet: str, plan_id: str) -> None:
        self._conn.execute("UPDATE plans SET applied_at = %s WHERE fleet = %s AND id = %s",
                           (time.time(), fleet, plan_id))

    @_translated
    def latest_plan(self, fleet: str, *, applied_only: bool = False) -> Plan | None:
        where = " AND applied_at IS NOT NULL" if applied_only else ""
        order = "applied_at" if applied_only else "created_at"
        rows = self._all(f"SELECT body FROM plans WHERE fleet = %s{where} ORDER BY {order} DESC, seq DESC LIMIT 1",
                         (fleet,))
        return Plan.from_json(rows[0][0]) if rows else None

    # ---- launches --------------------------------------------------------------------
    @_translated
    def begin_launch(self, fleet: str, plan_id: str, pool: str, count: int,
                     token_for: Callable[[int], str]) -> LaunchRecord:
        """Next sequence number for (fleet, plan, pool) and the launch with its token, committed
        before the caller talks to the provider (serialised per pool by an advisory lock)."""
        with self._tx():
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"launch|{fleet}|{plan_id}|{pool}",))
            seq = int(self._all("SELECT COALESCE(MAX(seq), 0) FROM launches WHERE fleet = %s AND plan_id = %s"
                                " AND pool = %s", (fleet, plan_id, pool))[0][0]) + 1
            row = self._all(
                "INSERT INTO launches (fleet, plan_id, pool, seq, token, count, status, requested_at)"
                f" VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_LAUNCH_COLS}",
                (fleet, plan_id, pool, seq, token_for(seq), count, LaunchStatus.REQUESTED, time.time()))
        return LaunchRecord(*row[0])

    @_translated
    def finish_launch(self, launch_id: int, *, status: str, launched: int, error_kind: str = "",
                      error_message: str = "") -> None:
        self._conn.execute("UPDATE launches SET status = %s, launched = %s, error_kind = %s, error_message = %s,"
                           " finished_at = %s WHERE id = %s",
                           (status, launched, error_kind, error_message, time.time(), launch_id))

    @_translated
    def launches(self, fleet: str, *, status: str | None = None) -> list[LaunchRecord]:
        where, args = ("AND status = %s", (fleet, status)) if status else ("", (fleet,))
        return [LaunchRecord(*r) for r in
                self._all(f"SELECT {_LAUNCH_COLS} FROM launches WHERE fleet = %s {where} ORDER BY id", args)]

    # ---- instances -------------------------------------------------------------------
    @_translated
    def record_instances(self, fleet: str, instances: Iterable[Instance], *,
                         on_demand_prices: dict[str, float] | None = None, plan_id: str = "") -> int:
        """Insert instances not yet recorded (existing rows are kept); returns how many were new."""
        prices = on_demand_prices or {}
        new = 0
        with self._tx():
            for i in instances:
                cur = self._conn.execute(
                    "INSERT INTO instances (fleet, id, pool, market, accelerator, gpus, price_per_hour,"
                    " on_demand_price, launched_at, plan_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                    " ON CONFLICT DO NOTHING",
                    (fleet, i.id, i.pool.id, i.pool.market.value, i.accelerator, i.gpus, i.price_per_hour,
                     prices.get(i.pool.id), i.launched_at, i.tags.get(TAG_PLAN, plan_id)))
                new += cur.rowcount
        return new

    @_translated
    def end_instances(self, fleet: str, ended: dict[str, tuple[float, str]]) -> None:
        """Mark instances ended: ``{id: (ended_at, reason)}``; already-ended rows keep their first end."""
        with self._tx(), self._conn.cursor() as cur:
            cur.executemany(
                "UPDATE instances SET ended_at = %s, end_reason = %s WHERE fleet = %s AND id = %s AND ended_at IS NULL",
                [(ts, reason, fleet, iid) for iid, (ts, reason) in ended.items()])

    @_translated
    def instances(self, fleet: str, *, alive_only: bool = False) -> list[InstanceRecord]:
        where = " AND ended_at IS NULL" if alive_only else ""
        return [InstanceRecord(*r) for r in self._all(
            f"SELECT {_INSTANCE_COLS} FROM instances WHERE fleet = %s{where} ORDER BY launched_at, id", (fleet,))]

    # ---- events ----------------------------------------------------------------------
    def record_event(self, fleet: str, kind: str, *, instance_id: str = "", pool: str = "",
                     detail: dict[str, Any] | None = None, ts: float | None = None) -> None:
        self.record_events([(fleet, kind, instance_id, pool, detail, ts)])

    @_translated
    def record_events(self, events: Iterable[tuple[str, str, str, str, dict[str, Any] | None, float | None]]) -> None:
        """Many events in one transaction: ``(fleet, kind, instance_id, pool, detail, ts)``."""
        rows = []
        for fleet, kind, instance_id, pool, detail, ts in events:
            if not KIND_RE.match(kind):
                raise ValueError(f"event kind {kind!r}: use lowercase letters, digits and dashes")
            rows.append((fleet, time.time() if ts is None else ts, kind, instance_id, pool,
                         json.dumps(detail or {}, sort_keys=True, default=str)))
        if not rows:
            return
        with self._tx(), self._conn.cursor() as cur:
            cur.executemany("INSERT INTO events (fleet, ts, kind, instance_id, pool, detail)"
                            " VALUES (%s, %s, %s, %s, %s, %s)", rows)

    @_translated
    def events(self, fleet: str, *, kinds: Collection[str] = ()) -> list[EventRecord]:
        where, args = "", [fleet]
        if kinds:
            where = " AND kind = ANY(%s)"
            args.append(list(kinds))
        return [EventRecord(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6])) for r in self._all(
            f"SELECT id, fleet, ts, kind, instance_id, pool, detail FROM events WHERE fleet = %s{where}"
            " ORDER BY ts, id", args)]

    # ---- blocked pools ---------------------------------------------------------------
    @_translated
    def block(self, prefix: str, *, until: float, reason: str) -> None:
        """Block a pool-id prefix until ``until``; an existing longer block is kept."""
        self._conn.execute(
            "INSERT INTO blocked_pools (prefix, until, reason, created_at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (prefix) DO UPDATE SET reason = excluded.reason,"
            " until = GREATEST(blocked_pools.until, excluded.until)", (prefix, until, reason, time.time()))

    @_translated
    def blocks(self) -> list[BlockRecord]:
        return [BlockRecord(*r) for r in self._all("SELECT prefix, until, reason, created_at FROM blocked_pools"
                                                   " ORDER BY prefix")]

    @_translated
    def unblock(self, prefixes: Collection[str]) -> None:
        self._conn.execute("DELETE FROM blocked_pools WHERE prefix = ANY(%s)", (list(prefixes),))

    # ---- per-fleet lock (leased rows, across machines) --------------------------------
    @contextlib.contextmanager
    def lock(self, fleet: str, command: str, *, ttl: float = LOCK_TTL_SECONDS) -> Iterator[LockInfo]:
        """Hold ``fleet``'s lock for the block; raises ``FleetLockedError`` naming the holder."""
        info = self.acquire_lock(fleet, command, ttl=ttl)
        try:
            yield info
        finally:
            self.release_lock(fleet)

    @_translated
    def acquire_lock(self, fleet: str, command: str, *, ttl: float = LOCK_TTL_SECONDS) -> LockInfo:
        me, pid, host = owner.current_owner()
        with self._tx():
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"lock|{fleet}",))
            now = self._server_now()
            rows = self._all(f"SELECT {_LOCK_COLS} FROM locks WHERE fleet = %s", (fleet,))
            if rows:
                held = LockInfo(*rows[0])
                if held.owner != me and held.expires_at > now and owner.is_alive(held.owner) is not False:
                    raise FleetLockedError(
                        f"fleet {fleet!r} is busy: {held.describe()} holds its lock since "
                        f"{time.strftime('%H:%M:%S', time.localtime(held.acquired_at))}; wait for it to finish "
                        f"(a lock of a vanished process expires at "
                        f"{time.strftime('%H:%M:%S', time.localtime(held.expires_at))})")
            self._conn.execute(
                f"INSERT INTO locks ({_LOCK_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (fleet) DO UPDATE"
                " SET owner = excluded.owner, pid = excluded.pid, host = excluded.host, command = excluded.command,"
                " acquired_at = excluded.acquired_at, expires_at = excluded.expires_at",
                (fleet, me, pid, host, command, now, now + ttl))
        return LockInfo(fleet, me, pid, host, command, now, now + ttl)

    @_translated
    def refresh_lock(self, fleet: str, *, ttl: float = LOCK_TTL_SECONDS) -> None:
        """Extend this process's lease; ``FleetLockedError`` if another process took the lock over."""
        me = owner.current_owner()[0]
        with self._tx():
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"lock|{fleet}",))
            rows = self._all(f"SELECT {_LOCK_COLS} FROM locks WHERE fleet = %s", (fleet,))
            if not rows or rows[0][1] == me:
                self._conn.execute("UPDATE locks SET expires_at = %s WHERE fleet = %s AND owner = %s",
                                   (self._server_now() + ttl, fleet, me))
                return
        raise FleetLockedError(f"fleet {fleet!r}: this command's lock expired and {LockInfo(*rows[0]).describe()} "
                               "took it over; stopping here")

    @_translated
    def release_lock(self, fleet: str) -> None:
        self._conn.execute("DELETE FROM locks WHERE fleet = %s AND owner = %s", (fleet, owner.current_owner()[0]))

    @_translated
    def lock_holder(self, fleet: str) -> LockInfo | None:
        rows = self._all(f"SELECT {_LOCK_COLS} FROM locks WHERE fleet = %s", (fleet,))
        return LockInfo(*rows[0]) if rows else None
