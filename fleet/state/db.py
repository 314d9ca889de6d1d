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
from collections.abc import Callable, Iterator
from pathlib import Path

from fleet.errors import StateError
from fleet.private import private_dir, private_file

REPAIR_HINT = "run `fleet repair --spec SPEC` to rebuild the record from the providers' tags"


class CorruptStoreError(StateError):
    """The file exists but cannot be read as a state store; ``fleet repair`` may move it aside."""


class UnwritableStoreError(StateError):
    """The store can (maybe) be read but not written: a read-only filesystem or folder, or a full
    disk. ``fleet down`` and ``fleet status`` then work from what they can read."""


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
Step = str | Callable[[sqlite3.Connection], None]

#: v2: what the provider bills for each instance, read back after launch, beside the planned
#: ``price_per_hour`` (``billed_per_hour`` NULL until read), where that rate came from
#: (``billed_source``) and the rental the provider reports (``rental``: ``bid``, ``on-demand``, ...).
_V2 = (
    "ALTER TABLE instances ADD COLUMN billed_per_hour REAL",
    "ALTER TABLE instances ADD COLUMN billed_source TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE instances ADD COLUMN rental TEXT NOT NULL DEFAULT ''",
)

#: ``MIGRATIONS[n]`` takes a store from version n-1 to n, inside one transaction.
#: A later version goes here as ``n: ("ALTER TABLE ...", _rewrite_fn)``.
MIGRATIONS: dict[int, tuple[Step, ...]] = {
    1: tuple(s.strip() for s in _V1.split(";") if s.strip()),
    2: _V2,
}
SCHEMA_VERSION = max(MIGRATIONS)


def latest_version() -> int:
    """The schema version this code migrates to (the highest step in ``MIGRATIONS``)."""
    return max(MIGRATIONS)


#: URL schemes of a PostgreSQL store (``fleet.state.postgres``, imported only for one of them).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL store (told without importing its module)."""
    return url.startswith(POSTGRES_SCHEMES)


def path_from_url(url: str) -> Path:
    """``/x/state.db``, ``sqlite:///x/state.db`` -> Path; other schemes -> StateError."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite://"))
    if "://" in url:
        scheme = url.split("://", 1)[0]
        raise StateError(
            f"state store URL {url!r}: scheme {scheme!r} is not supported yet; "
            "use a file path or sqlite:///path (set $SPOTFLEET_STATE)"
        )
    return Path(url).expanduser()


def connect(path: Path, *, create: bool, read_only: bool = False) -> sqlite3.Connection:
    """Open ``path`` (creating it and its folder when ``create``) and migrate it; ``read_only``
    opens an existing store without writing anything (nor migrating it).

    A store that is a symbolic link is refused: every command makes the store private, and a
    link would have it change the mode of whatever file the link names."""
    if path.is_symlink():
        raise StateError(
            f"state store {path} is a symbolic link (to {os.readlink(path)}); spotfleet does not "
            f"follow it: point $SPOTFLEET_STATE at the real file"
        )
    if not path.exists() and not create:
        raise StateError(
            f"no state store at {path}: create a fleet with `fleet up SPEC`, or {REPAIR_HINT} "
            "(a store copied elsewhere: point $SPOTFLEET_STATE at the copy)"
        )
    if read_only:
        return _connect_read_only(path)
    if path.is_dir():
        raise StateError(f"state store {path} is a directory; point $SPOTFLEET_STATE at a file")
    if create and not path.parent.exists():
        try:
            private_dir(path.parent)
        except OSError as err:
            raise StateError(f"cannot create the state folder {path.parent}: {err.strerror}") from None
    if path.exists() or create:  # the store and its WAL files are private: 0600 (SQLite copies the mode)
        for suffix in ("", "-wal", "-shm"):
            if suffix == "" or os.path.lexists(f"{path}{suffix}"):
                if Path(f"{path}{suffix}").is_symlink():
                    raise StateError(
                        f"{path}{suffix} is a symbolic link; spotfleet does not follow links "
                        "beside its state store: remove it"
                    )
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


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """Open ``path`` for reading only. A WAL store needs its shared-memory file, which a read-only
    or full filesystem may not let SQLite create: then it is read as an immutable file (changes
    still in a ``-wal`` file a crashed command left are not seen)."""
    from urllib.parse import quote

    uri = f"file:{quote(str(path.absolute()))}"
    last: sqlite3.Error | None = None
    for query in ("mode=ro", "mode=ro&immutable=1"):
        try:
            conn = sqlite3.connect(
                f"{uri}?{query}", uri=True, timeout=10.0, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as err:
            last = err
            continue
        try:
            found = conn.execute("SELECT version FROM schema_version").fetchone()
        except sqlite3.Error as err:
            conn.close()
            last = err
            continue
        if found is None or int(found[0]) != latest_version():
            conn.close()
            raise StateError(
                f"state store {path} has schema v{found[0] if found else '?'} and cannot be "
                f"migrated to v{latest_version()} while it cannot be written"
            )
        return conn
    with translated(path):
        raise last if last is not None else sqlite3.OperationalError("unable to open database file")
    raise AssertionError("unreachable")


def _migrate(conn: sqlite3.Connection, path: Path, *, create: bool) -> None:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_version" not in tables:
        if tables - {"sqlite_sequence"}:
            raise StateError(
                f"{path} is an SQLite file but not a spotfleet state store; point $SPOTFLEET_STATE elsewhere"
            )
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
        raise StateError(
            f"state store {path} has schema v{version}, newer than this spotfleet knows (v{latest}); upgrade spotfleet"
        )
    if version == latest:
        return
    with transaction(conn):
        # re-read inside the write lock: another process may have migrated meanwhile
        have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        current = (
            int(conn.execute("SELECT version FROM schema_version").fetchone()[0]) if "schema_version" in have else 0
        )
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


def _filesystem(folder: Path) -> tuple[bool, bool]:
    """(mounted read-only, full) for the filesystem holding ``folder``."""
    try:
        vfs = os.statvfs(folder)
    except OSError:
        return False, False
    return bool(vfs.f_flag & os.ST_RDONLY), vfs.f_bavail * vfs.f_frsize < 64 * 1024


def copy_advice(path: Path) -> str:
    """A command that moves the store somewhere writable and points spotfleet at the copy (its
    ``-wal`` file goes with it, so nothing recorded is lost)."""
    import shlex

    target = "~/spotfleet-state"
    return (
        f"`mkdir -p {target} && cp -p {shlex.quote(str(path))}* {target}/ && "
        f"export SPOTFLEET_STATE={target}/{shlex.quote(path.name)}`"
    )


def read_only_message(path: Path) -> str:
    """Why the store cannot be written, and a fix that works when followed (nothing is deleted by it)."""
    folder = path.parent
    on_ro_fs, full = _filesystem(folder)
    copy = f"copy the store to a writable folder and use the copy: {copy_advice(path)}"
    if on_ro_fs:
        return (
            f"state store {path} cannot be written: the filesystem holding {folder} is mounted read-only; "
            f"remount it read-write, or {copy}"
        )
    if full:
        return (
            f"state store {path} cannot be written: the filesystem holding {folder} is full; "
            f"free space there, or {copy}"
        )
    blocked = [p for p in (path, folder) if p.exists() and not os.access(p, os.W_OK)]
    if blocked and all(_owned(p) for p in blocked):
        return (
            f"state store {path} cannot be written: {' and '.join(map(str, blocked))} not writable by this "
            f"user; make it writable (`chmod u+w {' '.join(map(str, blocked))}`), or {copy}"
        )
    return (
        f"state store {path} cannot be written: {folder} is not writable by this user (nor is it theirs to "
        f"change); ask its owner, or {copy}"
    )


def _owned(p: Path) -> bool:
    try:
        return not hasattr(os, "getuid") or p.stat().st_uid == os.getuid()
    except OSError:
        return False


@contextlib.contextmanager
def translated(path: Path) -> Iterator[None]:
    """Turn sqlite3 errors into ``StateError`` messages a user can act on."""
    try:
        yield
    except sqlite3.OperationalError as err:
        text = str(err)
        if "locked" in text or "busy" in text:
            raise StateError(
                f"state store {path} is busy (another fleet command is writing); try again in a moment"
            ) from None
        if "no such table" in text or "no such column" in text:
            raise CorruptStoreError(f"state store {path} is damaged ({text}); {REPAIR_HINT}") from None
        if (
            "readonly" in text
            or "disk is full" in text
            or ("unable to open" in text and not writable(path))
            or ("disk I/O error" in text and any(_filesystem(path.parent)))
        ):
            raise UnwritableStoreError(read_only_message(path)) from None
        raise StateError(f"state store {path}: {text}") from None
    except sqlite3.DatabaseError as err:
        raise CorruptStoreError(f"state store {path} is corrupt ({err}); {REPAIR_HINT}") from None
