"""Instance rows of the local cloud: creating, settling (pending -> running, notices,
preemptions) and ending them. Every function runs inside the caller's write transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from fleet.model import TAG_FLEET, Instance, InstanceState, PoolKey
from providers.local.market import PoolModel, digest
from providers.local.vendors import VENDORS

BOOT_SECONDS = 30.0  # simulated seconds an instance stays PENDING
#: Every local node is a process on this machine: other nodes reach it on the loopback address.
LOCAL_ADDRESS = "127.0.0.1"
ALIVE = (InstanceState.PENDING.value, InstanceState.RUNNING.value)
ALIVE_SQL = "state IN ('pending', 'running')"


def to_instance(row: sqlite3.Row) -> Instance:
    """The instance of one ``instances`` row. The row is the local cloud's own, typed by its
    schema (``providers.local.db``): it is converted field by field here and the instance built
    without pydantic's validation (``model_construct``), so that listing a fleet builds no
    validator (``fleet status`` of a local fleet builds no pydantic model)."""
    tags = json.loads(row["tags"])
    if not isinstance(tags, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        raise ValueError(f"local cloud instance {row['id']}: its tags are not a string map")
    ended = row["ended_at"]
    return Instance.model_construct(
        id=str(row["id"]),
        fleet=str(row["fleet"] or ""),
        pool=PoolKey.from_id(row["pool"]),
        state=InstanceState(row["state"]),
        accelerator=str(row["accelerator"]),
        gpus=int(row["gpus"]),
        price_per_hour=float(row["price"]),
        launched_at=float(row["launched_at"]),
        ended_at=None if ended is None else float(ended),
        reason="",
        tags=tags,
        address=LOCAL_ADDRESS,
    )


@dataclass(frozen=True)
class Clock:
    """Simulated epoch seconds now, and the epoch the market's elapsed time counts from."""

    start: float
    now: float

    @property
    def elapsed(self) -> float:
        return self.now - self.start


def alive_in_pool(conn: sqlite3.Connection, pool_id: str) -> int:
    return conn.execute(f"SELECT COUNT(*) FROM instances WHERE pool=? AND {ALIVE_SQL}", (pool_id,)).fetchone()[0]


def alive_by_pool(conn: sqlite3.Connection, provider: str) -> dict[str, int]:
    rows = conn.execute(
        f"SELECT pool, COUNT(*) FROM instances WHERE provider=? AND {ALIVE_SQL} GROUP BY pool", (provider,)
    )
    return {pool: n for pool, n in rows}


def create(
    conn: sqlite3.Connection, model: PoolModel, clock: Clock, seed: int, *, token: str, count: int, tags: dict[str, str]
) -> list[sqlite3.Row]:
    """Insert ``count`` instances of ``model`` under ``token`` (ids derived from seed and token)."""
    pool = model.offer.pool
    vendor = VENDORS[pool.provider]
    first = conn.execute(
        "SELECT COUNT(*) FROM instances WHERE provider=? AND token=?", (pool.provider, token)
    ).fetchone()[0]
    ids = []
    for idx in range(first, first + count):
        salt = 0
        while True:
            iid = vendor.make_id(digest(seed, pool.provider, token, idx, salt))
            if conn.execute("SELECT 1 FROM instances WHERE id=?", (iid,)).fetchone() is None:
                break
            salt += 1
        preempt = model.preemption_at(clock.elapsed, f"{pool.provider}/{iid}", seed)
        preempt_at = None if preempt is None else clock.start + preempt
        notice_at = None
        if preempt_at is not None and vendor.notice_seconds > 0:
            notice_at = preempt_at - vendor.notice_seconds
        conn.execute(
            "INSERT INTO instances (id, provider, pool, fleet, token, idx, state, accelerator, gpus, price,"
            " launched_at, running_at, preempt_at, notice_at, tags) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                iid,
                pool.provider,
                pool.id,
                tags.get(TAG_FLEET) or None,
                token,
                idx,
                InstanceState.PENDING.value,
                model.offer.accelerator,
                model.offer.gpus,
                model.offer.price_per_hour,
                clock.now,
                clock.now + BOOT_SECONDS,
                preempt_at,
                notice_at,
                json.dumps(tags, sort_keys=True),
            ),
        )
        ids.append(iid)
    return by_ids(conn, ids)


def by_ids(conn: sqlite3.Connection, ids: list[str], chunk: int = 500) -> list[sqlite3.Row]:
    """The rows of ``ids`` that exist, in the order given."""
    rows: dict[str, sqlite3.Row] = {}
    for k in range(0, len(ids), chunk):
        part = ids[k : k + chunk]
        rows.update(
            (r["id"], r)
            for r in conn.execute(f"SELECT * FROM instances WHERE id IN ({','.join('?' * len(part))})", part)
        )
    return [rows[i] for i in ids if i in rows]


def due(conn: sqlite3.Connection, now: float) -> bool:
    """Whether ``settle`` has anything to do at ``now`` (a cheap read before taking the write lock)."""
    return (
        conn.execute(
            f"SELECT EXISTS (SELECT 1 FROM instances WHERE {ALIVE_SQL} AND (preempt_at <= ?"
            " OR (state='pending' AND running_at <= ?) OR (noticed=0 AND notice_at <= ?)))",
            (now, now, now),
        ).fetchone()[0]
        == 1
    )


def settle(conn: sqlite3.Connection, now: float, notices: Path, time_scale: float = 0.0) -> list[str]:
    """Bring every alive instance up to ``now``; returns the ids preempted by this call.

    Notices are written (once) when the notice window opens; a preemption whose window
    was never observed still gets its notice file, for the record. ``time_scale``
    (simulated seconds per real second) dates the preemption on the wall clock too.
    """
    conn.execute("UPDATE instances SET state='running' WHERE state='pending' AND running_at <= ?", (now,))
    for row in conn.execute(
        f"SELECT id, preempt_at FROM instances WHERE {ALIVE_SQL} AND noticed=0 AND notice_at <= ?", (now,)
    ).fetchall():
        wall = time.time() + (row["preempt_at"] - now) / time_scale if time_scale > 0 else None
        write_notice(notices, row["id"], row["preempt_at"], wall_deadline=wall)
        conn.execute("UPDATE instances SET noticed=1 WHERE id=?", (row["id"],))
    gone = [
        r["id"]
        for r in conn.execute(f"SELECT id FROM instances WHERE {ALIVE_SQL} AND preempt_at <= ?", (now,)).fetchall()
    ]
    conn.executemany("UPDATE instances SET state='preempted', ended_at=preempt_at WHERE id=?", [(i,) for i in gone])
    return gone


def write_notice(notices: Path, instance_id: str, at: float, *, wall_deadline: float | None = None) -> None:
    """``<notices>/<id>.json`` = ``{"action": "terminate", "time": at, "wall_deadline": w}``, atomically.

    ``time`` is on the simulated clock; ``wall_deadline`` (when the clock runs) is the same
    moment on the wall clock, which is what a process on the node can wait for.
    """
    notices.mkdir(parents=True, exist_ok=True)
    tmp = notices / f".{instance_id}.tmp"
    doc: dict[str, object] = {"action": "terminate", "time": at}
    if wall_deadline is not None:
        doc["wall_deadline"] = wall_deadline
    tmp.write_text(json.dumps(doc))
    tmp.replace(notices / f"{instance_id}.json")


def end(conn: sqlite3.Connection, instance_id: str, state: InstanceState, at: float) -> None:
    conn.execute(f"UPDATE instances SET state=?, ended_at=? WHERE id=? AND {ALIVE_SQL}", (state.value, at, instance_id))
