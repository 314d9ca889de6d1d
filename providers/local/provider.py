"""``LocalProvider``: one simulated vendor of the local cloud, speaking the Provider protocol.

It keeps the protocol contract (``providers.base``) the way a real adapter must:
tags on every instance, idempotent launches by token (the same token returns the same
instances; different parameters under a used token are refused like EC2's
``IdempotentParameterMismatch``), capacity shortfalls reported in the result, throttling
retried here with backoff, terminate idempotent and blind to untagged instances.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Sequence

from fleet.errors import ProviderError
from fleet.model import (
    TAG_FLEET,
    BilledRate,
    Instance,
    InstanceState,
    LaunchRequest,
    LaunchResult,
    Market,
    Offer,
    PoolKey,
    Quota,
    fleet_tags,
)
from providers.base import BucketRef, OfferQuery, StorageSpec
from providers.kit.retry import Retrier, RetryRules
from providers.local import buckets, ledger, quotas
from providers.local.cloud import LocalCloud, fingerprint, take_fault
from providers.local.market import PoolModel
from providers.local.vendors import ERROR_KIND, FAULT_ERRORS, Vendor

log = logging.getLogger(__name__)

#: Seconds slept before each retry of a throttled call (full jitter below each value).
RETRY_DELAYS = (0.02, 0.05, 0.1, 0.2)


class LocalProvider:
    """A Provider whose ``name`` is the simulated vendor's (``aws``, ``gcp``, ...)."""

    def __init__(self, cloud: LocalCloud, vendor: Vendor, *, retry_delays: Sequence[float] = RETRY_DELAYS):
        self.cloud = cloud
        self.vendor = vendor
        self.name = vendor.name
        self.retrier = Retrier(RetryRules(delays=tuple(retry_delays)))

    def __repr__(self) -> str:
        return f"LocalProvider({self.name!r}, root={str(self.cloud.root)!r})"

    # ---- Provider protocol ---------------------------------------------------------------
    def now(self) -> float:
        return self.cloud.now()

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """This vendor's catalog pools with live capacity and trace-derived risk."""
        clock = self.cloud.settle()
        accs = {a.upper() for a in query.accelerators}
        regions = set(query.regions)
        running = ledger.alive_by_pool(self.cloud.db.conn(), self.name)
        overrides = self.cloud.capacity_overrides()
        out = []
        for pool_id in self.cloud.market.pool_ids(self.name, query.accelerators):
            model = self.cloud.market.pool(pool_id)
            o = model.offer
            if (accs and o.accelerator not in accs) or (regions and o.pool.region not in regions):
                continue
            if (o.market is Market.SPOT and not query.spot) or (o.market is Market.ON_DEMAND and not query.on_demand):
                continue
            free = model.capacity(clock.elapsed, overrides.get(pool_id)) - running.get(pool_id, 0)
            out.append(model.as_offer(free))
        return out

    def launch(self, request: LaunchRequest) -> LaunchResult:
        """Create up to ``request.count`` instances; see the protocol contract.

        Raises QuotaExceededError, AuthError, TransientProviderError, RateLimitedError
        (after retries) and ProviderError for a pool of another provider, an unknown pool
        or a reused token with different parameters.
        """
        pool = request.offer.pool
        if pool.provider != self.name:
            raise ProviderError(
                self.name,
                f"pool {pool.id} belongs to {pool.provider}, not {self.name}",
                code=self.vendor.code("unknown-pool"),
            )
        if pool.id not in self.cloud.market:
            raise ProviderError(
                self.name,
                f"no pool {pool.id} in the local cloud",
                region=pool.region,
                code=self.vendor.code("unknown-pool"),
            )
        # throttling is retried by the kit's engine, as the real adapters do; nothing else is
        return self.retrier.call(lambda: self._launch_once(request), idempotent=False)

    def list_instances(self, fleet: str) -> list[Instance]:
        """Alive instances of this vendor whose spotfleet fleet tag is ``fleet``."""
        self._round_trip()
        self.cloud.settle()
        rows = self.cloud.db.read(
            f"SELECT * FROM instances WHERE provider=? AND fleet=? AND {ledger.ALIVE_SQL} ORDER BY rowid",
            (self.name, fleet),
        )
        return [ledger.to_instance(r) for r in rows]

    def ended_at(self, ids: Sequence[str]) -> dict[str, float]:
        """When these instances of this vendor ended, on the simulated clock (the cloud knows it)."""
        self._round_trip()
        self.cloud.settle()
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        rows = self.cloud.db.read(
            f"SELECT id, ended_at FROM instances WHERE provider=? AND id IN ({marks}) AND ended_at IS NOT NULL",
            (self.name, *wanted),
        )
        return {r["id"]: float(r["ended_at"]) for r in rows}

    def billed_rates(self, instances: Sequence[Instance]) -> dict[str, BilledRate]:
        """What the simulated vendor bills (``providers.base.ReadsBilledRate``): each alive instance's
        ledger price, the market's price when it was created."""
        self._round_trip()
        self.cloud.settle()
        wanted = list(dict.fromkeys(i.id for i in instances))
        if not wanted:
            return {}
        now = self.cloud.clock().now
        marks = ",".join("?" * len(wanted))
        rows = self.cloud.db.read(f"SELECT * FROM instances WHERE provider=? AND id IN ({marks})", (self.name, *wanted))
        return {
            r["id"]: BilledRate(
                per_hour=float(r["price"]), source="instance", rental=PoolKey.from_id(r["pool"]).market.value, at=now
            )
            for r in rows
            if r["provider"] == self.name and r["state"] in ledger.ALIVE
        }

    def terminate(self, ids: Sequence[str]) -> None:
        """Terminate these instances; unknown or ended ids are success; untagged ones are skipped."""
        self._round_trip()
        clock = self.cloud.settle()
        with self.cloud.db.write() as conn:
            for row in ledger.by_ids(conn, list(dict.fromkeys(ids))):
                if row["provider"] != self.name or row["state"] not in ledger.ALIVE:
                    continue
                if not row["fleet"]:
                    log.warning("%s: not terminating %s: it carries no %s tag", self.name, row["id"], TAG_FLEET)
                    continue
                ledger.end(conn, row["id"], InstanceState.TERMINATED, clock.now)
                self.cloud.stop_node(row)

    def ensure_bucket(self, spec: StorageSpec) -> BucketRef:
        return buckets.ensure(self.cloud.buckets, self.name, spec)

    def console_output(self, instance: Instance) -> str:
        """The node's raw output (the local cloud's console); "" for an instance without a node."""
        from providers.local.nodes import console

        return console(self.cloud.root, instance.id)

    def quotas(self) -> list[Quota]:
        """This vendor's simulated GPU quotas with their use now (``fleet local quota``)."""
        self._round_trip()
        self.cloud.settle()
        return quotas.quotas(self.cloud.db.conn(), self.name)

    # ---- internals -----------------------------------------------------------------------
    def _round_trip(self) -> None:
        """The simulated network and API time of one call (``LocalCloud.api_latency``)."""
        if self.cloud.api_latency > 0:
            time.sleep(self.cloud.api_latency)

    def _raise_fault(self, kind: str, request: LaunchRequest) -> None:
        pool = request.offer.pool
        raise FAULT_ERRORS[kind](
            self.name,
            f"injected {kind} fault launching into {pool.id}",
            region=pool.region,
            code=self.vendor.code(kind),
        )

    def _launch_once(self, request: LaunchRequest) -> LaunchResult:
        self._round_trip()
        pool = request.offer.pool
        front = self.cloud.take_fault(pool.id, ("throttle", "server-error", "auth", "quota"))
        if front is not None:
            self._raise_fault(front, request)
        model = self.cloud.market.pool(pool.id)
        tags = {**request.tags, **fleet_tags(request.fleet, pool)}
        print_ = fingerprint(request.fleet, pool.id, request.count, tags)
        self.cloud.settle()
        with self.cloud.db.write() as conn:
            clock = self.cloud.clock()
            seen = conn.execute(
                "SELECT * FROM launches WHERE provider=? AND token=?", (self.name, request.token)
            ).fetchone()
            if seen is not None:
                if seen["fingerprint"] != print_:
                    raise ProviderError(
                        self.name,
                        f"launch token {request.token!r} was already used with different parameters",
                        region=pool.region,
                        code=self.vendor.code("mismatch"),
                    )
                rows = conn.execute(
                    "SELECT * FROM instances WHERE provider=? AND token=? ORDER BY idx", (self.name, request.token)
                ).fetchall()
                return LaunchResult(
                    instances=tuple(ledger.to_instance(r) for r in rows),
                    error_code=seen["error_code"],
                    error_message=seen["error_message"],
                    error_kind=seen["error_kind"],
                )
            n, code, message, kind = self._fulfilment(conn, request, model, clock)
            rows = ledger.create(conn, model, clock, self.cloud.seed, token=request.token, count=n, tags=tags)
            conn.execute(
                "INSERT INTO launches VALUES (?, ?, ?, ?, ?, ?)",
                (self.name, request.token, print_, code, message, kind),
            )
        instances = tuple(ledger.to_instance(r) for r in rows)
        self.cloud.start_nodes(rows, request.node)
        return LaunchResult(instances=instances, error_code=code, error_message=message, error_kind=kind)

    def _fulfilment(
        self, conn: sqlite3.Connection, request: LaunchRequest, model: PoolModel, clock: ledger.Clock
    ) -> tuple[int, str, str, str]:
        """How many instances a fresh launch gets, and the vendor's code, message and error
        kind for a shortfall (a quota that binds before capacity is reported as the quota)."""
        pool = request.offer.pool
        capacity = ERROR_KIND["capacity"]
        if take_fault(conn, pool.id, ("capacity",)):
            return (
                0,
                self.vendor.code("capacity"),
                f"injected capacity fault: no {pool.instance_type} in {pool.id}",
                capacity,
            )
        price = model.offer.price_per_hour
        if request.max_price is not None and pool.market is Market.SPOT and request.max_price < price:
            return (
                0,
                self.vendor.code("price"),
                (f"max price {request.max_price:.4f} is below the spot price {price:.4f} of {pool.id}"),
                capacity,
            )
        allowed, quota = quotas.room(conn, model.offer)
        n = min(request.count, self.cloud.room(conn, model, clock))
        if allowed < n:
            return (
                allowed,
                self.vendor.code("quota"),
                (
                    f"quota {quota.label} ({quota.limit:g}, {quota.in_use:g} in use) allows {allowed} of "
                    f"{request.count} {pool.instance_type} in {pool.id}"
                ),
                ERROR_KIND["quota"],
            )
        if n < request.count:
            return (
                n,
                self.vendor.code("capacity"),
                (f"only {n} of {request.count} {pool.instance_type} available in {pool.id} right now"),
                capacity,
            )
        return n, "", "", ""
