"""Validated reads of state-store rows, and finding the damaged ones for ``fleet repair``.

SQLite keeps whatever bytes a column is given, so a row can hold garbage (a torn write by
another tool, a hand edit, disk damage inside a page that still checks out). Every row the
store returns passes through ``record()``, ``plan()`` or ``event()`` here: a bad row raises
``DamagedRowError`` naming the table, the row and ``fleet repair`` instead of a
``JSONDecodeError`` or ``TypeError`` deep in a command. ``damage()`` scans every table
and lists each bad row; ``fleet repair`` drops or resets exactly those rows.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from fleet.model import Plan, PlanDigest
from fleet.state.db import CorruptStoreError
from fleet.state.records import BlockRecord, EventRecord, FleetRecord, InstanceRecord, LaunchRecord, LockInfo

R = TypeVar("R")

_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float)}


class DamagedRowError(CorruptStoreError):
    """One row of the store cannot be read; ``fleet repair`` rebuilds it (the rest of the file is fine)."""

    def __init__(self, path: Path | str, table: str, key: str, fleet: str, why: str):
        self.table, self.key, self.fleet, self.why = table, key, fleet, why
        target = f" {fleet}" if fleet else ""
        super().__init__(
            f"state store {path}: {table} row {key} is damaged ({why}); "
            f"run `fleet repair{target}` to rebuild it from the providers' tags"
        )


@dataclass(frozen=True)
class Damage:
    """A bad row found by ``damage()``: its table, SQLite rowid, fleet (may be '') and what is wrong."""

    table: str
    rowid: int
    fleet: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _problem(cls: type, row: tuple[Any, ...]) -> str:
    """'' when every column of ``row`` has the type ``cls`` declares, else what is wrong."""
    fields = dataclasses.fields(cls)
    if len(row) != len(fields):
        return f"{len(row)} columns, expected {len(fields)}"
    for f, value in zip(fields, row):
        ann = str(f.type)
        if value is None and "None" in ann:
            continue
        base = ann.split("|")[0].strip()
        allowed = _TYPES.get(base)
        if allowed is None:
            continue  # dict fields are checked by their own reader
        if isinstance(value, bool) or not isinstance(value, allowed):
            return f"{f.name} holds {type(value).__name__} {str(value)[:40]!r}, expected {base}"
    return ""


def record(
    cls: Callable[..., R], row: tuple[Any, ...], *, path: Path | str, table: str, key: str, fleet: str = ""
) -> R:
    """``cls(*row)`` after checking the column types (and a fleet's spec JSON)."""
    why = _problem(cls, row)  # type: ignore[arg-type]
    if not why and cls is FleetRecord and row[2] is not None:
        why = _json_object_problem(row[2], "spec_json")
    if why:
        raise DamagedRowError(path, table, key, fleet, why)
    return cls(*row)


def plan(body: Any, *, path: Path | str, fleet: str, plan_id: str) -> Plan:
    """The plan stored in ``plans.body``."""
    return _plan_as(Plan.from_json, body, path=path, fleet=fleet, plan_id=plan_id)


def plan_digest(body: Any, *, path: Path | str, fleet: str, plan_id: str) -> PlanDigest:
    """What a read-only look needs of the plan stored in ``plans.body`` (no pydantic model is built)."""
    return _plan_as(PlanDigest.from_json, body, path=path, fleet=fleet, plan_id=plan_id)


def _plan_as(read: Callable[[str], R], body: Any, *, path: Path | str, fleet: str, plan_id: str) -> R:
    """``read(body)``; a body it cannot read is a ``DamagedRowError`` naming the plan."""
    try:
        if not isinstance(body, str):
            raise ValueError(f"body holds {type(body).__name__}")
        return read(body)
    except (ValueError, TypeError, KeyError, AttributeError) as err:  # pydantic's ValidationError is a ValueError
        raise DamagedRowError(
            path,
            "plans",
            f"{fleet}/{plan_id}",
            fleet,
            f"the plan body is not a valid plan: {str(err).splitlines()[0][:80]}",
        ) from None


def event(row: tuple[Any, ...], *, path: Path | str) -> EventRecord:
    """An ``events`` row ``(id, fleet, ts, kind, instance_id, pool, detail)``."""
    fleet = row[1] if isinstance(row[1], str) else ""
    why = _problem(EventRecord, row[:6] + ({},)) or _json_object_problem(row[6], "detail")
    if why:
        raise DamagedRowError(path, "events", str(row[0]), fleet, why)
    id_, fleet_name, ts, kind, instance_id, pool = row[:6]
    return EventRecord(id_, fleet_name, ts, kind, instance_id, pool, json.loads(row[6]))


def _json_object_problem(text: Any, column: str) -> str:
    if not isinstance(text, str):
        return f"{column} holds {type(text).__name__}, expected JSON text"
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return f"{column} is not JSON"
    return "" if isinstance(value, dict) else f"{column} is JSON but not an object"


#: table -> (columns read, record class; None where ``damage`` checks the row itself)
SCANS: dict[str, tuple[str, type | None]] = {
    "fleets": ("name, status, spec_json, spec_hash, backend, created_at, updated_at", FleetRecord),
    "plans": ("fleet, id, body, created_at, applied_at", None),
    "launches": (
        "id, fleet, plan_id, pool, seq, token, count, status, launched, error_kind, error_message,"
        " requested_at, finished_at",
        LaunchRecord,
    ),
    "instances": (
        "fleet, id, pool, market, accelerator, gpus, price_per_hour, launched_at, on_demand_price,"
        " ended_at, end_reason, plan_id, billed_per_hour, billed_source, rental",
        InstanceRecord,
    ),
    "events": ("id, fleet, ts, kind, instance_id, pool, detail", None),
    "blocked_pools": ("prefix, until, reason, created_at", BlockRecord),
    "locks": ("fleet, owner, pid, host, command, acquired_at, expires_at", LockInfo),
}


def damage(conn: sqlite3.Connection, path: Path | str) -> list[Damage]:
    """Every row of every table that a read would refuse."""
    found: list[Damage] = []
    for table, (cols, cls) in SCANS.items():
        for rowid, *row in conn.execute(f"SELECT rowid, {cols} FROM {table} ORDER BY rowid"):
            row_t = tuple(row)
            fleet = row_t[1] if table in ("launches", "events") else row_t[0]
            fleet = fleet if isinstance(fleet, str) else ""
            try:
                if table == "plans":
                    if not (isinstance(row_t[0], str) and isinstance(row_t[1], str)):
                        raise DamagedRowError(path, table, str(rowid), fleet, "fleet or id is not text")
                    plan(row_t[2], path=path, fleet=row_t[0], plan_id=row_t[1])
                elif table == "events":
                    event(row_t, path=path)
                else:
                    assert cls is not None
                    record(cls, row_t, path=path, table=table, key=str(rowid), fleet=fleet)
            except DamagedRowError as err:
                found.append(Damage(table, rowid, fleet, err.why))
    return found


def fixed_fleet(row: tuple[Any, ...], now: float) -> tuple[Any, ...]:
    """A damaged ``fleets`` row's columns after status..updated_at, readable ones kept: an unreadable
    spec is dropped (``fleet repair NAME --spec SPEC`` restores it) with its hash."""
    _name, status, spec_json, spec_hash, backend, created, updated = row
    spec_ok = spec_json is None or not _json_object_problem(spec_json, "spec_json")
    number = (int, float)
    return (
        status if isinstance(status, str) else "repaired",
        spec_json if spec_ok else None,
        spec_hash if spec_ok and isinstance(spec_hash, str) else "",
        backend if isinstance(backend, str) else "",
        created if isinstance(created, number) and not isinstance(created, bool) else now,
        updated if isinstance(updated, number) and not isinstance(updated, bool) else now,
    )
