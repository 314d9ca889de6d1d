"""The local cloud's SQLite file: schema, per-thread connections, write transactions.

Safe for concurrent threads and processes: every connection waits on a busy timeout,
the file is in WAL mode (readers never block the writer) and every change runs in a
``BEGIN IMMEDIATE`` transaction, so two writers serialise instead of deadlocking.
An unreadable file raises ``FleetError`` naming the file and the fix.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fleet.errors import FleetError
from fleet.private import private_file
from fleet.state.db import transaction

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 30_000

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS instances (
    id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    pool TEXT NOT NULL,
    fleet TEXT,                      -- the spotfleet fleet tag, NULL for foreign instances
    token TEXT NOT NULL,
    idx INTEGER NOT NULL,
    state TEXT NOT NULL,
    accelerator TEXT NOT NULL,
    gpus INTEGER NOT NULL,
    price REAL NOT NULL,
    launched_at REAL NOT NULL,
    running_at REAL NOT NULL,
    ended_at REAL,
    preempt_at REAL,
    notice_at REAL,
    noticed INTEGER NOT NULL DEFAULT 0,
    tags TEXT NOT NULL,
    pid INTEGER
);
CREATE INDEX IF NOT EXISTS instances_fleet ON instances(provider, fleet, state);
CREATE INDEX IF NOT EXISTS instances_pool ON instances(pool, state);
CREATE INDEX IF NOT EXISTS instances_token ON instances(provider, token, idx);
CREATE INDEX IF NOT EXISTS instances_alive ON instances(state, preempt_at);
CREATE TABLE IF NOT EXISTS launches (
    provider TEXT NOT NULL,
    token TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    error_code TEXT NOT NULL DEFAULT '',
    error_message TEXT NOT NULL DEFAULT '',
    error_kind TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (provider, token)
);
CREATE TABLE IF NOT EXISTS faults (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    prefix TEXT NOT NULL,
    kind TEXT NOT NULL,
    remaining INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS capacity (pool TEXT PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS quotas (provider TEXT NOT NULL, region TEXT NOT NULL, market TEXT NOT NULL,
    accelerator TEXT NOT NULL, gpus INTEGER NOT NULL, PRIMARY KEY (provider, region, market, accelerator));
"""


#: The only fix for a broken cloud file, with what it costs.
RESET_HINT = (
    "`fleet local reset` starts a fresh simulated cloud, which DELETES every simulated instance, "
    "its node processes and buckets; keep a copy of the file first if you need it"
)


def _not_writable(path: Path) -> str:
    """Why ``path`` (or the folder its WAL files live in) cannot be written, or '' when it can."""
    folder = path.parent
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return f"the filesystem holding {folder} is mounted read-only"
    except OSError:
        return ""
    if path.exists() and not os.access(path, os.W_OK):
        return f"{path} is read-only"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"its folder {folder} is read-only"
    return ""


_WRITE_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _write_lock(path: Path) -> threading.Lock:
    """One lock per file per process: threads queue here instead of polling SQLite's busy handler."""
    with _LOCKS_GUARD:
        return _WRITE_LOCKS.setdefault(path.absolute(), threading.Lock())


class Database:
    """One SQLite file; a connection per thread, opened lazily."""

    def __init__(self, path: Path):
        self.path = path
        self._local = threading.local()
        self._lock = _write_lock(path)
        private_file(path)  # created 0600 before SQLite makes it (its -wal/-shm copy the mode)
        try:
            with self.write() as conn:
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                version = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
        except sqlite3.DatabaseError as err:
            raise self._unreadable(err) from err
        if int(version) != SCHEMA_VERSION:
            raise FleetError(
                f"local cloud {path} has schema version {version}, this spotfleet knows {SCHEMA_VERSION}; {RESET_HINT}"
            )

    def _unreadable(self, err: Exception) -> FleetError:
        why = _not_writable(self.path)
        if why:
            return FleetError(
                f"local cloud file {self.path} cannot be written: {why}; make it writable "
                f"(e.g. `chmod u+w {self.path} {self.path.parent}`); its instances are intact"
            )
        return FleetError(f"local cloud file {self.path} is unreadable ({err}); {RESET_HINT}")

    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            try:
                conn.execute("PRAGMA journal_mode=WAL")
            except sqlite3.DatabaseError as err:
                conn.close()
                raise self._unreadable(err) from err
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on error.
        Not reentrant."""
        with self._lock, transaction(self.conn()) as conn:
            yield conn

    def read(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        return self.conn().execute(sql, params).fetchall()

    def meta(self) -> dict[str, str]:
        return {r["key"]: r["value"] for r in self.read("SELECT key, value FROM meta")}

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
