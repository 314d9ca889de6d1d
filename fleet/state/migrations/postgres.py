"""PostgreSQL schema steps (``MIGRATIONS[n]``: version n-1 -> n), the twin of ``fleet.state.db``'s.

Differences from SQLite are only where the dialects differ: ``BIGSERIAL`` ids, ``DOUBLE
PRECISION`` times, and a ``seq`` column on ``plans`` that orders plans saved in the same
instant (SQLite uses its ``rowid``).
"""

from __future__ import annotations

_V1 = """
CREATE TABLE fleets (
  name TEXT PRIMARY KEY, status TEXT NOT NULL, spec_json TEXT, spec_hash TEXT NOT NULL DEFAULT '',
  backend TEXT NOT NULL DEFAULT '', created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL);
CREATE TABLE plans (
  fleet TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
  applied_at DOUBLE PRECISION, seq BIGSERIAL, PRIMARY KEY (fleet, id));
CREATE TABLE launches (
  id BIGSERIAL PRIMARY KEY, fleet TEXT NOT NULL, plan_id TEXT NOT NULL, pool TEXT NOT NULL,
  seq INTEGER NOT NULL, token TEXT NOT NULL UNIQUE, count INTEGER NOT NULL, status TEXT NOT NULL,
  launched INTEGER NOT NULL DEFAULT 0, error_kind TEXT NOT NULL DEFAULT '', error_message TEXT NOT NULL DEFAULT '',
  requested_at DOUBLE PRECISION NOT NULL, finished_at DOUBLE PRECISION, UNIQUE (fleet, plan_id, pool, seq));
CREATE TABLE instances (
  fleet TEXT NOT NULL, id TEXT NOT NULL, pool TEXT NOT NULL, market TEXT NOT NULL, accelerator TEXT NOT NULL,
  gpus INTEGER NOT NULL, price_per_hour DOUBLE PRECISION NOT NULL, on_demand_price DOUBLE PRECISION,
  launched_at DOUBLE PRECISION NOT NULL, ended_at DOUBLE PRECISION, end_reason TEXT NOT NULL DEFAULT '',
  plan_id TEXT NOT NULL DEFAULT '', PRIMARY KEY (fleet, id));
CREATE TABLE events (
  id BIGSERIAL PRIMARY KEY, fleet TEXT NOT NULL, ts DOUBLE PRECISION NOT NULL, kind TEXT NOT NULL,
  instance_id TEXT NOT NULL DEFAULT '', pool TEXT NOT NULL DEFAULT '', detail TEXT NOT NULL DEFAULT '{}');
CREATE INDEX events_by_fleet ON events (fleet, ts, id);
CREATE TABLE blocked_pools (
  prefix TEXT PRIMARY KEY, until DOUBLE PRECISION NOT NULL, reason TEXT NOT NULL,
  created_at DOUBLE PRECISION NOT NULL);
CREATE TABLE locks (
  fleet TEXT PRIMARY KEY, owner TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL, command TEXT NOT NULL,
  acquired_at DOUBLE PRECISION NOT NULL, expires_at DOUBLE PRECISION NOT NULL)
"""

#: v2: the billed rate read back per instance (see ``fleet.state.db._V2``).
_V2 = (
    "ALTER TABLE instances ADD COLUMN billed_per_hour DOUBLE PRECISION",
    "ALTER TABLE instances ADD COLUMN billed_source TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE instances ADD COLUMN rental TEXT NOT NULL DEFAULT ''",
)

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: tuple(s.strip() for s in _V1.split(";") if s.strip()),
    2: _V2,
}
SCHEMA_VERSION = max(MIGRATIONS)
