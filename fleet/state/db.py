"""Opening the SQLite file: URL parsing, schema migrations, and turning sqlite errors into
``StateError`` messages that say what to do.

Promises: a store opened here is private (file and WAL files 0600, a folder it creates
0700: the record names instances, plans and costs); it is at ``SCHEMA_VERSION`` (older files are migrated in one
transaction); a missing, empty-when-not-creating, corrupt, foreign or newer-schema file
raises ``StateError`` naming the file and pointing to ``fleet repair``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Callable, Iterator, Union

from fleet.errors import StateError
from fleet.private import private_dir, private_file

REPAIR_HINT = "run `fleet repair --spec SPEC` to rebuild the record from the providers' tags"


class CorruptStoreError(StateError):
    """The file exists but cannot be read as a state store; ``fleet repair`` may move it aside."""

_V1 = """
CREATE TABLE fleets (
  name TEXT PRIMARY KEY, status TEXT NOT NULL, spec_json TEXT, spec_hash TEXT NOT NULL DEFAULT '',
  backend TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE plans (
  fleet TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, created_at REAL NOT NULL, applied_at REAL,
  PRIMARY KEY (fleet, id));
CREATE TABLE launches (
  id INTEGER PRIMARY KEY AUTOINCREMENT, fleet TEXT NOT NULL, plan_id TEXT NOT NULL, pool TEXT NOT NULL,
  seq INTEGER NOT NULL, token TEXT NOT NULL UNIQUE, count INTEGER NOT NULL, status TEXT NOT NULL,
  launched INTEGER NOT NULL DEFAULT 0, error_kind TEXT NOT NULL DEFAULT '', error_message TEXT NOT NULL DEFAULT '',
  requested_at REAL NOT NULL, finished_at REAL, UNIQUE (fleet, plan_id, pool, seq));
CREATE TABLE instances (
  fleet TEXT NOT NULL, id TEXT NOT NULL, pool TEXT NOT NULL, market TEXT NOT NULL, accelerator TEXT NOT NULL,
  gpus INTEGER NOT NULL, price_per_hour REAL NOT NULL, on_demand_price REAL, launched_at REAL NOT NULL,
  ended_at REAL, end_reason TEXT NOT NULL DEFAULT '', plan_id TEXT NOT NULL DEFAULT '', PRIMARY KEY (fleet, id));
CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT, fleet TEXT NOT NULL, ts REAL NOT NULL, kind TEXT NOT NULL,
  instance_id TEXT NOT NULL DEFAULT '', pool TEXT NOT NULL DEFAULT '', detail TEXT NOT NULL DEFAULT '{}');
CREATE INDEX events_by_fleet ON events (fleet, ts, id);
CREATE TABLE blocked_pools (
  prefix TEXT PRIMARY KEY, until REAL NOT NULL, reason TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE locks (
  fleet TEXT PRIMARY KEY, owner TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL, command TEXT NOT NULL,
  acquired_at REAL NOT NULL, expires_at REAL NOT NULL);
"""

#: One step of a migration: an SQL statement, or a function for data rewrites.
Step = Union[str, Callable[[sqlite3.Connection], None]]

#: ``MIGRATIONS[n]`` takes a store from version n-1 to n, inside one transaction.
#: Schema v2 goes here as ``2: ("ALTER TABLE ...", _rewrite_fn)``.
MIGRATIONS: dict[int, tuple[Step, ...]] = {
    1: tuple(s.strip() for s in _V1.split(";") if s.strip()),
}
SCHEMA_VERSION = max(MIGRATIONS)


def latest_version() -> int:
    """The schema version this code migrates to (the highest step in ``MIGRATIONS``)."""
    return max(MIGRATIONS)


def path_from_url(url: str) -> Path:
    """``/x/state.db``, ``sqlite:///x/state.db`` -> Path; other schemes -> StateError."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite://"))
    if "://" in url:
        scheme = url.split("://", 1)[0]
        raise StateError(f"state store URL {url!r}: scheme {scheme!r} is not supported yet; "
                         "use a file path or sqlite:///path (set $SPOTFLEET_STATE)")
    return Path(url).expanduser()


def connect(path: Path, *, create: bool) -> sqlite3.Connection:
    """Open ``path`` (creating it and its folder when ``create``) and migrate it."""
    if not path.exists() and not create:
        raise StateError(f"no state store at {path}: create a fleet with `fleet up SPEC`, or {REPAIR_HINT}")
    if path.is_dir():
        raise StateError(f"state store {path} is a directory; point $SPOTFLEET_STATE at a file")
    if create and not path.parent.exists():
        try:
            private_dir(path.parent)
        except OSError as err:
            raise StateError(f"cannot create the state folder {path.parent}: {err.strerror}") from None
    if path.exists() or create:   # the store and its WAL files are private: 0600 (SQLite copies the mode)
        for suffix in ("", "-wal", "-shm"):
            if suffix == "" or Path(f"{path}{suffix}").exists():
                private_file(Path(f"{path}{suffix}"))
    try:
        conn = sqlite3.connect(str(path), timeout=10.0, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as err:
        raise StateError(f"cannot open state store {path}: {err}") from None
    try:
        with translated(path):
            conn.execute("PRAGMA busy_timeout = 10000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            _migrate(conn, path, create=create)
    except BaseException:
        conn.close()
        raise
    return conn


def _migrate(conn: sqlite3.Connection, path: Path, *, create: bool) -> None:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_version" not in tables:
        if tables - {"sqlite_sequence"}:
            raise StateError(f"{path} is an SQLite file but not a spotfleet state store; "
                             "point $SPOTFLEET_STATE elsewhere")
        if not create:
            raise CorruptStoreError(f"state store {path} is empty; {REPAIR_HINT}")
        version = 0
    else:
        row = conn.execute("SELECT version FROM schema_version").fetchone()
        if row is None:
            raise CorruptStoreError(f"state store {path} has no schema version (corrupt); {REPAIR_HINT}")
        version = int(row[0])
    latest = latest_version()
    if version > latest:
        raise StateError(f"state store {path} has schema v{version}, newer than this spotfleet knows "
                         f"(v{latest}); upgrade spotfleet")
    if version == latest:
        return
    with transaction(conn):
        # re-read inside the write lock: another process may have migrated meanwhile
        have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        current = int(conn.execute("SELECT version FROM schema_version").fetchone()[0]) \
            if "schema_version" in have else 0
        if current == 0:
            conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO schema_version VALUES (0)")
        for version in range(current + 1, latest + 1):
            for step in MIGRATIONS[version]:
                if isinstance(step, str):
                    conn.execute(step)
                else:
                    step(conn)
            conn.execute("UPDATE schema_version SET version = ?", (version,))


TABLES = ("fleets", "plans", "launches", "instances", "events", "blocked_pools", "locks")


def verify(conn: sqlite3.Connection, path: Path) -> None:
    """Read the whole file once (``PRAGMA quick_check``) and every table; CorruptStoreError if any fails."""
    with translated(path):
        problems = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall() if r[0] != "ok"]
        if problems:
            raise CorruptStoreError(f"state store {path} is corrupt ({problems[0]}); {REPAIR_HINT}")
        for table in TABLES:
            conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (rollback on error): one writer at a time."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def writable(path: Path) -> bool:
    """Whether this process may write ``path`` and create files beside it (its WAL and shared memory)."""
    folder = path.parent
    return os.access(folder, os.W_OK | os.X_OK) and (not path.exists() or os.access(path, os.W_OK))


def read_only_message(path: Path) -> str:
    """Why the store cannot be written, and the fix (nothing is deleted by it)."""
    folder = path.parent
    try:
        on_ro_fs = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        on_ro_fs = False
    what = (f"the filesystem holding {folder} is mounted read-only" if on_ro_fs else
            f"{path if path.exists() and not os.access(path, os.W_OK) else folder} is not writable by this user")
    return (f"state store {path} cannot be written: {what}; fleet commands record every step there, so make "
            f"it writable (e.g. `chmod u+w {path} {folder}`) or point $SPOTFLEET_STATE at a writable file")


@contextlib.contextmanager
def translated(path: Path) -> Iterator[None]:
    """Turn sqlite3 errors into ``StateError`` messages a user can act on."""
    try:
        yield
    except sqlite3.OperationalError as err:
        text = str(err)
        if "locked" in text or "busy" in text:
            raise StateError(f"state store {path} is busy (another fleet command is writing); "
                             "try again in a moment") from None
        if "no such table" in text or "no such column" in text:
            raise CorruptStoreError(f"state store {path} is damaged ({text}); {REPAIR_HINT}") from None
        if "readonly" in text or ("unable to open" in text and not writable(path)):
            raise StateError(read_only_message(path)) from None
        raise StateError(f"state store {path}: {text}") from None
    except sqlite3.DatabaseError as err:
        raise CorruptStoreError(f"state store {path} is corrupt ({err}); {REPAIR_HINT}") from None
