"""``LocalCloud``: the embedded simulated multi-provider spot market.

A directory holds everything: ``cloud.db`` (SQLite, shared safely by threads and
processes), ``notices/<instance>.json`` (interruption notices for the node agent) and
``buckets/<name>/`` (checkpoint storage). The clock is simulated::

    sim_now = start + (real_now - created) * time_scale + offset

with ``offset`` moved by ``advance``. Preemptions are evaluated lazily, and
deterministically, on every call: an instance's preemption time is fixed at launch from
the seed, its pool's trace and the hazard model.

Settings (time scale, seed) are fixed when the cloud is created; ``open`` on an existing
cloud keeps them, ``reset`` starts a fresh cloud with new ones.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import sqlite3
import time
from pathlib import Path

from fleet.errors import FleetError
from fleet.model import Instance, InstanceState, NodeConfig, Quota
from fleet.private import private_dir
from providers.local import ledger, nodes, quotas
from providers.local.db import Database
from providers.local.market import PoolModel, SpotMarket
from providers.local.vendors import FAULT_KINDS, VENDORS

DB_NAME = "cloud.db"
#: Settings of a new cloud (see ``LocalCloud.open``).
DEFAULTS: dict[str, object] = {"time_scale": 60.0, "seed": 0, "run_nodes": False, "api_latency": 0.0}
log = logging.getLogger(__name__)
FOREIGN_TAGS = {"Name": "not-managed-by-spotfleet", "owner": "someone-else"}


class LocalCloud:
    """Open with ``LocalCloud.open(root)``; ``provider(name)`` gives a Provider per vendor."""

    def __init__(self, root: Path, db: Database):
        self.root = root
        self.db = db
        settings = {k: json.loads(v) for k, v in db.meta().items()}
        self.created = float(settings["created"])
        self.start = float(settings["start"])
        self.time_scale = float(settings["time_scale"])
        self.seed = int(settings["seed"])
        self.run_nodes = bool(settings["run_nodes"])
        self.api_latency = float(settings["api_latency"])
        self.market = SpotMarket.for_seed(self.seed)
        self.notices = root / "notices"
        self.buckets = root / "buckets"
        self._providers: dict[str, object] = {}

    # ---- lifecycle ---------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        root: Path,
        *,
        time_scale: float | None = None,
        seed: int | None = None,
        run_nodes: bool | None = None,
        api_latency: float | None = None,
    ) -> LocalCloud:
        """Open the cloud at ``root``, creating it if it does not exist.

        Settings apply when the cloud is created (None: the default in ``DEFAULTS``);
        an existing cloud keeps its own and logs a warning naming the reset that changes
        them. ``time_scale``: simulated seconds per real second (60: one simulated hour
        per real minute; 0 freezes the clock so only ``advance`` moves it). ``seed``:
        drives the market. ``run_nodes``: run startup commands as real processes.
        ``api_latency``: real seconds each launch/list/terminate call takes, as a remote
        API would. Raises FleetError for bad settings or an unreadable cloud file.
        """
        asked = {"time_scale": time_scale, "seed": seed, "run_nodes": run_nodes, "api_latency": api_latency}
        for key in ("time_scale", "api_latency"):
            if (asked[key] or 0) < 0:
                raise FleetError(f"local cloud {key.replace('_', ' ')} must be >= 0 (got {asked[key]})")
        root = Path(root).expanduser().absolute()
        try:
            private_dir(root)  # the cloud's files hold node env (secrets) and the fleet's record
        except OSError as err:
            raise FleetError(f"cannot create the local cloud directory {root}: {err.strerror}") from err
        db = Database(root / DB_NAME)
        real = time.time()
        initial = {
            "created": real,
            "start": float(int(real)),
            "offset": 0.0,
            **{k: DEFAULTS[k] if v is None else v for k, v in asked.items()},
        }
        with db.write() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in initial.items()]
            )
        cloud = cls(root, db)
        for key, value in asked.items():
            if value is not None and value != getattr(cloud, key):
                flag = f"--{key.replace('_', '-')}"
                log.warning(
                    "the local cloud at %s keeps its %s %s (asked for %s); `fleet local reset %s` "
                    "starts a fresh cloud with it (and deletes every simulated instance)",
                    root,
                    key.replace("_", " "),
                    getattr(cloud, key),
                    value,
                    flag if isinstance(value, bool) else f"{flag} {value}",
                )
        return cloud

    @staticmethod
    def exists(root: Path) -> bool:
        return (Path(root).expanduser() / DB_NAME).exists()

    @classmethod
    def reset(cls, root: Path, **settings: object) -> LocalCloud:
        """Delete the cloud at ``root`` (instances, node processes, faults, notices, buckets)
        and create a fresh one; settings (as for ``open``) not given are kept from the old
        cloud where it was readable. The fresh cloud's clock starts no earlier than the old
        one's: records made on the old clock never lie in the future."""
        root = Path(root).expanduser().absolute()
        old: dict[str, object] = {}
        old_now = 0.0
        if cls.exists(root):
            try:
                old_cloud = cls(root, Database(root / DB_NAME))
                old = {key: getattr(old_cloud, key) for key in DEFAULTS}
                old_now = old_cloud.now()
                old_cloud._stop_all_nodes()
                old_cloud.db.close()
            except (FleetError, sqlite3.DatabaseError, KeyError, ValueError):
                old = {}
        for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"):
            (root / name).unlink(missing_ok=True)
        for sub in ("notices", "buckets", "nodes"):
            shutil.rmtree(root / sub, ignore_errors=True)
        merged = {**old, **{k: v for k, v in settings.items() if v is not None}}
        cloud = cls.open(root, **merged)  # type: ignore[arg-type]
        if old_now > cloud.now():  # simulated time never runs backwards, across resets too
            with cloud.db.write() as conn:
                conn.execute("UPDATE meta SET value=? WHERE key='start'", (json.dumps(float(math.ceil(old_now))),))
            cloud = cls(root, cloud.db)
        return cloud

    def provider(self, name: str):  # -> LocalProvider (import cycle kept out of the signature)
        """The simulated provider ``name`` (``aws``, ``gcp``, ...); FleetError if unknown."""
        from providers.local.provider import LocalProvider

        if name not in VENDORS:
            raise FleetError(f"the local cloud has no provider {name!r}; it simulates {', '.join(VENDORS)}")
        if name not in self._providers:
            self._providers[name] = LocalProvider(self, VENDORS[name])
        return self._providers[name]

    def provider_names(self) -> list[str]:
        return list(VENDORS)

    # ---- clock -------------------------------------------------------------------------
    def now(self) -> float:
        """Simulated epoch seconds."""
        offset = float(json.loads(self.db.read("SELECT value FROM meta WHERE key='offset'")[0][0]))
        return self.start + (time.time() - self.created) * self.time_scale + offset

    def clock(self) -> ledger.Clock:
        return ledger.Clock(self.start, self.now())

    def advance(self, seconds: float) -> float:
        """Move the simulated clock forward by ``seconds``; returns the new time."""
        if seconds < 0:
            raise FleetError(f"the simulated clock only moves forward (got {seconds} s)")
        with self.db.write() as conn:
            conn.execute("UPDATE meta SET value = CAST(value AS REAL) + ? WHERE key='offset'", (float(seconds),))
        self.settle()
        return self.now()

    def settle(self) -> ledger.Clock:
        """Apply everything due by now (boots, notices, preemptions); returns the clock used."""
        clock = self.clock()
        if ledger.due(self.db.conn(), clock.now):
            with self.db.write() as conn:
                clock = self.clock()
                ledger.settle(conn, clock.now, self.notices, self.time_scale)
        return clock

    # ---- inspection ----------------------------------------------------------------------
    def all_instances(self, *, alive_only: bool = False) -> list[Instance]:
        """Every instance of every provider (ours and foreign), oldest first."""
        self.settle()
        where = f"WHERE {ledger.ALIVE_SQL}" if alive_only else ""
        return [ledger.to_instance(r) for r in self.db.read(f"SELECT * FROM instances {where} ORDER BY rowid")]

    def instance_state(self, instance_id: str) -> InstanceState | None:
        """The state of ``instance_id`` now (after settling), None if it never existed."""
        self.settle()
        rows = self.db.read("SELECT state FROM instances WHERE id=?", (instance_id,))
        return InstanceState(rows[0]["state"]) if rows else None

    def free_capacity(self, pool_id: str) -> int:
        """Instances ``pool_id`` can still take now."""
        model = self._pool(pool_id)
        return self.room(self.db.conn(), model, self.settle())

    def room(self, conn: sqlite3.Connection, model: PoolModel, clock: ledger.Clock) -> int:
        """Instances ``model``'s pool can take at ``clock``: its capacity (pinned or from the
        market) less the instances alive in it."""
        row = conn.execute("SELECT n FROM capacity WHERE pool=?", (model.id,)).fetchone()
        capacity = model.capacity(clock.elapsed, None if row is None else row[0])
        return max(0, capacity - ledger.alive_in_pool(conn, model.id))

    def faults(self) -> list[dict[str, object]]:
        return [dict(r) for r in self.db.read("SELECT prefix, kind, remaining FROM faults ORDER BY id")]

    def capacity_overrides(self) -> dict[str, int]:
        return {r["pool"]: r["n"] for r in self.db.read("SELECT pool, n FROM capacity ORDER BY pool")}

    # ---- chaos controls ------------------------------------------------------------------
    def inject_fault(self, pool_prefix: str, kind: str, count: int = 1) -> None:
        """Make the next ``count`` launches into pools whose id starts with ``pool_prefix`` fail.

        capacity: reported in LaunchResult; throttle: retried inside the adapter, then
        RateLimitedError; server-error: TransientProviderError; quota: QuotaExceededError;
        auth: AuthError.
        """
        if kind not in FAULT_KINDS:
            raise FleetError(f"unknown fault kind {kind!r}; use one of {', '.join(FAULT_KINDS)}")
        if count < 1:
            raise FleetError(f"fault count must be at least 1 (got {count})")
        if pool_prefix.split("/")[0] not in VENDORS:
            raise FleetError(
                f"fault pool prefix {pool_prefix!r} must start with a provider name "
                f"({', '.join(VENDORS)}), e.g. aws/us-east-1"
            )
        with self.db.write() as conn:
            conn.execute("INSERT INTO faults (prefix, kind, remaining) VALUES (?, ?, ?)", (pool_prefix, kind, count))

    def clear_faults(self) -> None:
        with self.db.write() as conn:
            conn.execute("DELETE FROM faults")

    def take_fault(self, pool_id: str, kinds: tuple[str, ...]) -> str | None:
        """Consume one pending fault of ``kinds`` matching ``pool_id``; its kind, or None."""
        if not self.db.read("SELECT 1 FROM faults LIMIT 1"):
            return None
        with self.db.write() as conn:
            return take_fault(conn, pool_id, kinds)

    def preempt(self, instance_id: str, *, notice: bool = False) -> Instance:
        """Take ``instance_id`` back now (``notice``: after its vendor's notice window,
        writing the notice file now). FleetError when no such alive instance exists."""
        clock = self.settle()
        with self.db.write() as conn:
            row = conn.execute("SELECT * FROM instances WHERE id=?", (instance_id,)).fetchone()
            if row is None or row["state"] not in ledger.ALIVE:
                state = "does not exist" if row is None else f"is already {row['state']}"
                raise FleetError(f"instance {instance_id} {state}; `fleet local status` lists alive instances")
            window = VENDORS[row["provider"]].notice_seconds if notice else 0
            at = clock.now + window
            conn.execute(
                "UPDATE instances SET preempt_at=?, notice_at=?, noticed=0 WHERE id=?",
                (at, clock.now if VENDORS[row["provider"]].notice_seconds else None, instance_id),
            )
        self.settle()
        return ledger.to_instance(self.db.read("SELECT * FROM instances WHERE id=?", (instance_id,))[0])

    def set_capacity(self, pool_id: str, n: int) -> None:
        """Pin ``pool_id``'s capacity to ``n`` instances (a spot pool still has none while
        its trace is unavailable)."""
        self._pool(pool_id)
        if n < 0:
            raise FleetError(f"capacity must be >= 0 (got {n})")
        with self.db.write() as conn:
            conn.execute("INSERT OR REPLACE INTO capacity VALUES (?, ?)", (pool_id, n))

    def set_quota(self, scope: str, gpus: int | None, market: str = "", accelerator: str = "") -> None:
        """Limit the GPUs alive under ``scope`` (``provider`` or ``provider/region``), of
        ``market`` ("" = both) and ``accelerator`` ("" = any); ``gpus`` None removes the quota.
        Launches past it are cut and answered with the vendor's quota error."""
        provider, _, region = scope.strip("/").partition("/")
        if provider not in VENDORS or "/" in region:
            raise FleetError(
                f"quota scope {scope!r} must be a provider or provider/region ({', '.join(VENDORS)}), e.g. gcp/us-east4"
            )
        with self.db.write() as conn:
            quotas.set_quota(conn, provider, region, market, accelerator.upper(), gpus)

    def quotas(self) -> list[Quota]:
        """Every simulated quota with the GPUs in use under it now."""
        self.settle()
        return quotas.quotas(self.db.conn())

    def launch_foreign(self, pool_id: str, count: int = 1) -> list[Instance]:
        """Start ``count`` instances that carry no spotfleet tag (someone else's machines)."""
        model = self._pool(pool_id)
        clock = self.settle()
        with self.db.write() as conn:
            n = conn.execute("SELECT COUNT(*) FROM instances WHERE fleet IS NULL").fetchone()[0]
            rows = ledger.create(
                conn, model, clock, self.seed, token=f"foreign-{n}", count=count, tags=dict(FOREIGN_TAGS)
            )
        return [ledger.to_instance(r) for r in rows]

    # ---- node processes ----------------------------------------------------------------------
    def start_nodes(self, rows: list[sqlite3.Row], node: NodeConfig) -> None:
        """Start node processes for new instances when the cloud runs nodes."""
        if self.run_nodes and node.startup and rows:
            nodes.start(self, rows, node)

    def stop_node(self, row: sqlite3.Row) -> None:
        """Kill a terminated instance's node process, if it has one."""
        if row["pid"]:
            nodes.kill(row)

    def _stop_all_nodes(self) -> None:
        for row in self.db.read("SELECT id, pid FROM instances WHERE pid IS NOT NULL"):
            nodes.kill(row)

    def _pool(self, pool_id: str) -> PoolModel:
        if pool_id not in self.market:
            raise FleetError(
                f"the local cloud has no pool {pool_id!r}; "
                "pool ids look like aws/us-east-1/us-east-1a/p5.48xlarge/spot (see `fleet offers`)"
            )
        return self.market.pool(pool_id)


def take_fault(conn: sqlite3.Connection, pool_id: str, kinds: tuple[str, ...]) -> str | None:
    """Consume one fault of ``kinds`` whose prefix matches ``pool_id`` (oldest first)."""
    for row in conn.execute(
        f"SELECT id, prefix, kind FROM faults WHERE kind IN ({','.join('?' * len(kinds))}) ORDER BY id", kinds
    ).fetchall():
        if pool_id.startswith(row["prefix"]):
            conn.execute("UPDATE faults SET remaining = remaining - 1 WHERE id=?", (row["id"],))
            conn.execute("DELETE FROM faults WHERE id=? AND remaining <= 0", (row["id"],))
            return row["kind"]
    return None


def fingerprint(fleet: str, pool_id: str, count: int, tags: dict[str, str]) -> str:
    """What a launch token is bound to: reusing the token with another fingerprint is refused."""
    return json.dumps([fleet, pool_id, count, sorted(tags.items())])
