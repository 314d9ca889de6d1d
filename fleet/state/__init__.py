"""The state store: what was decided and what happened, per fleet.

Providers are the source of truth for what runs; the store records fleets (spec and
status), plans, launches (with their idempotency tokens, written before each call),
instance records and events (launched, preempted, terminated, lost, interruption
notices), blocked pools, and a per-fleet lock. ``open_store(url)`` returns the
embedded SQLite implementation, or the shared PostgreSQL one for a ``postgresql://`` URL.

A store that cannot be written (read-only filesystem or folder, full disk) raises
``UnwritableStoreError`` saying why and how to fix it.

Errors: a missing (when not creating), corrupt, foreign or newer-schema store raises
``StateError`` with a message pointing to ``fleet repair``; every row read is validated, and
one that holds garbage raises ``DamagedRowError`` naming its table, row and ``fleet repair``;
an unknown fleet raises
``FleetNotFoundError``; a fleet locked by a live process raises ``FleetLockedError``
naming the holder. A lock whose holder died (same host) or whose lease expired is taken over.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterable
from typing import Any, Protocol

from fleet.model import BilledRate, Instance, Plan, PlanDigest
from fleet.state.db import SCHEMA_VERSION, CorruptStoreError, UnwritableStoreError, path_from_url
from fleet.state.records import (
    BlockRecord,
    EventKind,
    EventRecord,
    FleetRecord,
    FleetStatus,
    InstanceRecord,
    LaunchRecord,
    LaunchStatus,
    LockInfo,
)
from fleet.state.rows import Damage, DamagedRowError

__all__ = [
    "SCHEMA_VERSION",
    "CorruptStoreError",
    "UnwritableStoreError",
    "StateStore",
    "open_store",
    "BlockRecord",
    "EventKind",
    "EventRecord",
    "FleetRecord",
    "Damage",
    "DamagedRowError",
    "FleetStatus",
    "InstanceRecord",
    "LaunchRecord",
    "LaunchStatus",
    "LockInfo",
]


class StateStore(Protocol):
    url: str
    read_only: bool

    # fleets
    def save_fleet(
        self, name: str, *, status: str, spec_json: str | None = None, spec_hash: str = "", backend: str = ""
    ) -> FleetRecord:
        """Create or update a fleet; a ``None`` spec keeps the recorded one."""

    def set_status(self, name: str, status: str) -> None: ...
    def find_fleet(self, name: str) -> FleetRecord | None: ...
    def get_fleet(self, name: str) -> FleetRecord:
        """The fleet's record; ``FleetNotFoundError`` naming the known fleets otherwise."""

    def list_fleets(self) -> list[FleetRecord]: ...

    # plans
    def save_plan(self, plan: Plan) -> None: ...
    def mark_plan_applied(self, fleet: str, plan_id: str) -> None: ...
    def latest_plan(self, fleet: str, *, applied_only: bool = False) -> Plan | None: ...
    def applied_plans(self, fleet: str, *, limit: int = 20) -> list[tuple[Plan, float]]:
        """The newest ``limit`` applied plans of ``fleet`` with when each was (last) applied, oldest first."""

    def latest_plan_digest(self, fleet: str, *, applied_only: bool = False) -> PlanDigest | None:
        """What ``latest_plan`` returns, as the plain ``PlanDigest`` a read-only look needs."""

    # launches
    def begin_launch(
        self, fleet: str, plan_id: str, pool: str, count: int, token_for: Callable[[int], str]
    ) -> LaunchRecord:
        """Record a launch (next sequence number, its token) before the provider call."""

    def finish_launch(
        self, launch_id: int, *, status: str, launched: int, error_kind: str = "", error_message: str = ""
    ) -> None: ...
    def launches(self, fleet: str, *, status: str | None = None) -> list[LaunchRecord]: ...

    # instances and events
    def record_instances(
        self,
        fleet: str,
        instances: Iterable[Instance],
        *,
        on_demand_prices: dict[str, float] | None = None,
        plan_id: str = "",
    ) -> int: ...
    def end_instances(self, fleet: str, ended: dict[str, tuple[float, str]]) -> None: ...
    def record_billed(self, fleet: str, rates: dict[str, BilledRate]) -> None:
        """Record what the provider bills for these instances (``{id: BilledRate}``), beside their
        planned price; a later reading replaces an earlier one (a re-bid changes the bill)."""

    def instances(self, fleet: str, *, alive_only: bool = False) -> list[InstanceRecord]: ...
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
        """Append one event; ``ts`` defaults to now (epoch seconds). Kinds: see ``EventKind``."""

    def record_events(
        self, events: Iterable[tuple[str, str, str, str, dict[str, Any] | None, float | None]]
    ) -> None: ...
    def events(self, fleet: str, *, kinds: Collection[str] = ()) -> list[EventRecord]: ...

    # blocked pools
    def block(self, prefix: str, *, until: float, reason: str) -> None: ...
    def blocks(self) -> list[BlockRecord]: ...
    def unblock(self, prefixes: Collection[str]) -> None: ...

    # per-fleet lock
    def lock(self, fleet: str, command: str, *, ttl: float = ...) -> contextlib.AbstractContextManager[LockInfo]:
        """Hold the fleet's lock for a ``with`` block; ``FleetLockedError`` when a live process has it."""

    def refresh_lock(self, fleet: str, *, ttl: float = ...) -> None:
        """Extend this process's lease; ``FleetLockedError`` when another process took it over."""

    def lock_holder(self, fleet: str) -> LockInfo | None: ...
    def verify(self) -> None:
        """Read everything once; ``CorruptStoreError`` when the file is damaged."""

    def damage(self) -> list[Damage]:
        """Every row a read would refuse (``DamagedRowError``), for ``fleet repair``."""

    def rebuild_rows(self, damage: Collection[Damage]) -> None:
        """Drop those rows (a fleet row keeps its name and readable columns) in one transaction."""

    def close(self) -> None: ...


def open_store(url: str, *, create: bool = True, read_only: bool = False) -> StateStore:
    """Open the store at ``url`` (a file path, ``sqlite:///path`` or ``postgresql://...``),
    migrating it if older.

    With ``create=False`` a missing store is a ``StateError`` instead of a new empty file.
    ``read_only`` opens an existing store without writing anything (for a store that cannot be
    written: every write then raises ``UnwritableStoreError``).
    """
    from fleet.state.db import is_postgres_url

    if is_postgres_url(url):
        from fleet.state.postgres import PostgresStore

        return PostgresStore(url, create=create, read_only=read_only)
    from fleet.state.sqlite import SQLiteStore

    return SQLiteStore(path_from_url(url), create=create, read_only=read_only)
