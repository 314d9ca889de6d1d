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
from collections.abc import Collection, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from fleet.errors import StateError
from fleet.state import rows
from fleet.state.db import POSTGRES_SCHEMES as SCHEMES
from fleet.state.db import REPAIR_HINT, TABLES, UnwritableStoreError, is_postgres_url
from fleet.state.migrations.postgres import MIGRATIONS
from fleet.state.sql import KIND_RE, LOCK_TTL_SECONDS, SQLStore, guarded

__all__ = ["KIND_RE", "LOCK_TTL_SECONDS", "SCHEMES", "PostgresStore", "is_postgres_url", "redacted"]


def redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresStore(SQLStore):
    """``StateStore`` on one PostgreSQL database; see ``fleet.state.StateStore`` for the contract.

    The connection commits each statement on its own (autocommit); statements that must hold
    together run in ``_tx()``. Launches and lock takeovers are serialised per key by
    ``pg_advisory_xact_lock``, and lease times are on the server's clock.
    """

    _IGNORE = ("INSERT", " ON CONFLICT DO NOTHING")
    _GREATEST = "GREATEST"
    _PLAN_ORDER = "seq"

    def __init__(self, url: str, *, create: bool = True, read_only: bool = False):
        try:
            import psycopg
        except ImportError:
            raise StateError("a postgresql:// state store needs psycopg: pip install 'spotfleet[postgres]'") from None
        super().__init__(redacted(url))
        self.read_only = read_only
        try:
            self._conn = psycopg.connect(
                url.replace("postgres://", "postgresql://", 1), autocommit=True, connect_timeout=10
            )
        except psycopg.Error as err:
            raise StateError(f"cannot open the state store {self.url}: {str(err).strip()}") from None
        try:
            self._migrate(create and not read_only) if not read_only else self._check_version()
        except BaseException:
            self._conn.close()
            raise

    # ---- what PostgreSQL does its own way --------------------------------------------
    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn driver errors into ``StateError`` (a missing table is a damaged store)."""
        import psycopg

        try:
            yield
        except (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.DiskFull) as err:
            raise UnwritableStoreError(
                f"state store {self.url} cannot be written ({err.diag.message_primary}); "
                "fleet commands record every step there: make the database writable "
                "(a primary with free disk), then run the command again"
            ) from None
        except psycopg.errors.UndefinedTable as err:
            raise StateError(f"state store {self.url} is damaged ({err.diag.message_primary}); {REPAIR_HINT}") from None
        except psycopg.OperationalError as err:
            raise StateError(f"cannot reach the state store {self.url}: {str(err).strip()}") from None
        except psycopg.Error as err:
            raise StateError(f"state store {self.url}: {str(err).strip()}") from None

    def _exec(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._conn.execute(sql.replace("?", "%s"), args)

    def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        with self._conn.cursor() as cur:
            cur.executemany(sql.replace("?", "%s"), rows)
            return int(cur.rowcount)

    def _insert_id(self, sql: str, args: Sequence[Any]) -> int:
        return int(self._all(f"{sql} RETURNING id", args)[0][0])

    def _tx(self) -> contextlib.AbstractContextManager[Any]:
        return self._conn.transaction()

    def _write(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()  # autocommit: one statement is its own transaction

    def _serialise(self, key: str) -> None:
        self._exec("SELECT pg_advisory_xact_lock(hashtext(?))", (key,))

    def _lock_clock(self) -> float:
        return float(self._all("SELECT extract(epoch from clock_timestamp())")[0][0])

    @guarded
    def _migrate(self, create: bool) -> None:
        have = {
            r[0]
            for r in self._all("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
        }
        if "schema_version" not in have:
            if "fleets" in have:
                raise StateError(
                    f"{self.url} holds a `fleets` table but is not a spotfleet state store; "
                    "point --state at another database"
                )
            if not create:
                raise StateError(f"no state store at {self.url}: create a fleet with `fleet up SPEC`, or {REPAIR_HINT}")
        latest = max(MIGRATIONS)
        with self._tx():
            self._serialise("spotfleet-migrate")
            self._conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = self._all("SELECT version FROM schema_version")
            if not row:
                self._conn.execute("INSERT INTO schema_version VALUES (0)")
            current = int(row[0][0]) if row else 0
            if current > latest:
                raise StateError(
                    f"state store {self.url} has schema v{current}, newer than this spotfleet knows "
                    f"(v{latest}); upgrade spotfleet"
                )
            for version in range(current + 1, latest + 1):
                for step in MIGRATIONS[version]:
                    self._conn.execute(step)
                self._exec("UPDATE schema_version SET version = ?", (version,))

    @guarded
    def _check_version(self) -> None:
        """For a read-only open: the schema must already be this version's (nothing is migrated)."""
        found = self._all("SELECT version FROM schema_version")
        if not found or int(found[0][0]) != max(MIGRATIONS):
            raise StateError(
                f"state store {self.url} is not at schema v{max(MIGRATIONS)} and cannot be "
                "migrated while it cannot be written"
            )

    @guarded
    def verify(self) -> None:
        for table in TABLES:
            self._all(f"SELECT COUNT(*) FROM {table}")

    def damage(self) -> list[rows.Damage]:
        """None: PostgreSQL keeps every column to its declared type, so the damage ``fleet repair``
        drops from SQLite (text in a number column, a torn page) cannot be stored here."""
        return []

    def rebuild_rows(self, damage: Collection[rows.Damage]) -> None:
        """Nothing to drop (see :meth:`damage`); damage named from elsewhere is refused."""
        if damage:
            raise StateError(f"state store {redacted(self.url)}: no row-level repair on PostgreSQL")
