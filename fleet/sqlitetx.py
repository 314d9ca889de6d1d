"""SQLite write transactions, shared by the state store (``fleet.state``) and the local cloud
(``providers.local``): a ground-level piece, so an adapter never imports the state store.

``transaction(conn)`` runs ``BEGIN IMMEDIATE`` ... ``COMMIT`` and rolls back on any error: one
writer at a time, and two writers serialise instead of deadlocking (the connection's busy
timeout makes the second wait)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator


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
