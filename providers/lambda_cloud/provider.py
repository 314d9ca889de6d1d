"""``LambdaProvider``: Lambda Cloud over its REST API, speaking the Provider protocol.

Offers (``providers.lambda_cloud.offers``): one ``GET /instance-types``, kept ``cache_seconds``;
only the regions with capacity now are offered, plus the pools this fleet's instances already
hold (capacity 0: the planner must still see where it runs). When the call fails,
``fleet.catalog.Catalog`` serves the shipped snapshot, whose pools are real Lambda types and
regions (a launch there may then be refused for capacity, and is reported so).

Launch (see ``providers.base`` for the contract; the kit's ``TokenLaunches`` does the token
bookkeeping): on-demand only. The instances of a launch carry the fleet, pool and launch-token
tags (``providers.lambda_cloud.instances``); those already tagged with the token count towards
the request, so a rerun after a crash starts only what is missing. A Lambda launch call is all
or none and limited to one per 12 seconds: the first asks for one instance, the next for the
rest, halving after a refusal (``_start``). A capacity shortfall is reported in the result, not
raised; a quota refusal before anything started is raised (QuotaExceededError). The node
bootstrap is the cloud-init user data (``providers.lambda_cloud.launch``); the SSH key Lambda
requires is the spec's or the fleet's own (``providers.lambda_cloud.keys``).

Ownership: tags are the truth; terminate and teardown never touch an instance or SSH key
spotfleet did not tag or name for the fleet.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from fleet.errors import InstanceNotFoundError, NoCapacityError, ProviderError, QuotaExceededError
from fleet.model import BilledRate, Instance, InstanceState, LaunchRequest, LaunchResult, Market, Offer
from fleet.spec import FleetSpec
from providers.base import BucketRef, OfferQuery, StorageSpec
from providers.kit.launch import Created, Shortfall, TokenLaunches
from providers.kit.node_store import missing_credentials, node_disk_bucket, store_settings
from providers.kit.ssh_keys import default_home, node_public_key
from providers.kit.terminate import owned_alive
from providers.lambda_cloud import keys
from providers.lambda_cloud.api import LambdaApi
from providers.lambda_cloud.errors import PROVIDER
from providers.lambda_cloud.instances import TAG_TOKEN, owner, to_instance
from providers.lambda_cloud.launch import launch_body
from providers.lambda_cloud.offers import occupied_offers, to_offers
from providers.lambda_cloud.schemas import Instance as Row
from providers.lambda_cloud.settings import LambdaSettings

log = logging.getLogger(__name__)

#: Where checkpoints live on a Lambda node when no object store is named (lost on terminate).
NODE_CHECKPOINT_DIR = "/home/ubuntu/spotfleet-checkpoints"


class LambdaProvider:
    name = PROVIDER

    def __init__(
        self,
        settings: LambdaSettings | None = None,
        *,
        api: LambdaApi | None = None,
        image_family: str = "",
        cache_seconds: float = 60.0,
        home: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ):
        self.settings = settings or LambdaSettings()
        self.api = api or LambdaApi()
        self.image_family = image_family or self.settings.image_family
        self.cache_seconds = cache_seconds
        self._environ = environ if environ is not None else os.environ
        self._home = home or default_home(self._environ)  # where a fleet's own SSH key pair is kept
        self._lock = threading.Lock()
        self._offers: tuple[float, list[Offer]] | None = None
        self._launches = TokenLaunches(self.name, clock=self.now)
        self._first_seen: dict[str, float] = {}
        self._node_credentials: dict[str, str] = {}
        self._keys_lock = threading.Lock()
        self._key_names: dict[tuple[str, str], str] = {}

    def __repr__(self) -> str:
        return f"LambdaProvider({self.api!r})"

    # ---- NodesWithoutIdentity ------------------------------------------------------------
    def use_node_credentials(self, env: Mapping[str, str]) -> None:
        """The scoped checkpoint-store credentials every node launched from now on receives."""
        with self._lock:
            self._node_credentials = dict(env)

    # ---- Provider protocol ---------------------------------------------------------------
    def now(self) -> float:
        return time.time()

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """On-demand offers in the regions with capacity now (cached briefly); [] for a spot-only query."""
        if not query.on_demand:
            return []
        with self._lock:
            cached = self._offers
        if cached is None or time.monotonic() - cached[0] > self.cache_seconds:
            live = to_offers(self.api.instance_types(), allows=lambda region: self.settings.allows(region, ""))
            cached = (time.monotonic(), sorted(live + self._occupied(live), key=lambda o: o.pool.id))
            with self._lock:
                self._offers = cached
        accs, regions = {a.upper() for a in query.accelerators}, set(query.regions)
        return [
            o
            for o in cached[1]
            if (accs and o.accelerator in accs or not accs and o.gpus > 0) and (not regions or o.pool.region in regions)
        ]

    def launch(self, request: LaunchRequest) -> LaunchResult:
        pool = request.offer.pool
        if pool.provider != self.name:
            raise ProviderError(
                self.name, f"pool {pool.id} belongs to {pool.provider}, not lambda", code="wrong-provider"
            )
        if pool.market is not Market.ON_DEMAND:
            raise ProviderError(self.name, f"pool {pool.id}: Lambda sells on-demand instances only", code="no-spot")
        with self._lock:
            granted = dict(self._node_credentials)
        refusal = missing_credentials(self.name, request.node.checkpoint_uri, granted)
        if refusal is not None:
            raise refusal
        fingerprint = (request.fleet, pool.id, request.count, tuple(sorted(request.tags.items())))

        def find() -> list[Instance]:
            now = self.now()
            return [
                self._instance(r, now)
                for r in self._rows()
                if owner(r) == request.fleet and r.tag_map().get(TAG_TOKEN) == request.token and _alive(r)
            ]

        return self._launches.launch(
            request, fingerprint=fingerprint, find=find, create=lambda n: self._start(request, n, granted)
        )

    def list_instances(self, fleet: str) -> list[Instance]:
        """This fleet's instances that are not terminated (found by the fleet's tag)."""
        now = self.now()
        return [self._instance(r, now) for r in self._rows() if owner(r) == fleet and _alive(r)]

    def billed_rates(self, instances: Sequence[Instance]) -> dict[str, BilledRate]:
        """What Lambda lists for these instances of ours (``providers.base.ReadsBilledRate``): the
        ``price_cents_per_hour`` of the instance type each one's own ``GET /instances`` row carries
        (the same object ``GET /instance-types`` answers; Lambda sells on-demand only and bills the
        listed price), source ``list``, rental ``on-demand``; one listing. An instance that is gone,
        terminating or not ours is left out; an unreadable listing raises MalformedResponseError."""
        wanted = {i.id for i in instances}
        if not wanted:
            return {}
        now = self.now()
        return {
            r.id: BilledRate(
                per_hour=round(r.instance_type.price_cents_per_hour / 100, 4), source="list", rental="on-demand", at=now
            )
            for r in self._rows()
            if r.id in wanted and owner(r) and _alive(r)
        }

    def terminate(self, ids: Sequence[str]) -> None:
        """Terminate these instances; gone (or going) is success; an untagged one is left alone."""
        doomed = owned_alive(self.name, ids, lambda: {r.id: r for r in self._rows()}, owned=owner, alive=_alive)
        if not doomed:
            return
        try:
            self.api.terminate(doomed)
        except InstanceNotFoundError:  # one went meanwhile, and Lambda then ends none: one by one
            for iid in doomed:
                try:
                    self.api.terminate([iid])
                except InstanceNotFoundError:
                    pass

    def ensure_bucket(self, spec: StorageSpec) -> BucketRef:
        """Lambda has no object storage: a folder on each node's disk, lost when the instance is
        terminated. Name an s3 or azure ``checkpoint.provider`` for checkpoints that outlive it
        (the nodes then get scoped credentials for the fleet's prefix)."""
        return node_disk_bucket(self.name, spec, NODE_CHECKPOINT_DIR)

    # ---- TearsDown -------------------------------------------------------------------------
    def teardown(self, fleet: str) -> list[str]:
        """Delete the SSH keys spotfleet registered for ``fleet`` once none of its instances is
        left; the names deleted (idempotent: none left, ``[]``)."""
        if self.list_instances(fleet):
            return []
        deleted = []
        with self._keys_lock:
            self._key_names = {k: v for k, v in self._key_names.items() if k[0] != fleet}
        for key in keys.fleet_keys(self.api.ssh_keys(), fleet):
            self.api.delete_ssh_key(key.id)
            deleted.append(f"ssh-key/{key.name}")
        return deleted

    # ---- internals -----------------------------------------------------------------------
    def _start(self, request: LaunchRequest, count: int, granted: Mapping[str, str]) -> Created:
        """Up to ``count`` instances, and why fewer when fewer.

        A Lambda launch is all or none and the API says only *whether* a pool has capacity, not
        how much. So the first call asks for one instance: a refusal then ends the request (the
        pool has nothing for us now; it is raised). Once one runs, the rest are asked for at once,
        and a capacity or quota refusal is answered by asking for half as many, down to one:
        two calls when the pool has room, about two per halving when it has less. A capacity
        refusal is a shortfall even before anything started; any other refusal then is raised."""
        pool = request.offer.pool
        try:
            public = node_public_key(self._home, request.fleet, request.node.ssh_key)
        except ValueError as err:
            raise ProviderError(self.name, str(err), code="invalid-ssh-key") from None
        key_name = self._key_name(request.fleet, public)
        secret_env = {**store_settings(request.node.checkpoint_uri, self._environ), **granted}
        made: list[Instance] = []
        ask = 1
        while ask > 0:
            now = self.now()
            body = launch_body(request, ask, key_name, secret_env, self.image_family, now=now)
            try:
                ids = self.api.launch(body, region=pool.region)
            except ProviderError as err:
                if made and isinstance(err, (NoCapacityError, QuotaExceededError)) and ask > 1:
                    ask //= 2
                    continue
                if not made and not isinstance(err, NoCapacityError):
                    raise
                return Created(made, Shortfall.of(err))
            tags = {t["key"]: t["value"] for t in body["tags"]}
            with self._lock:
                for iid in ids:
                    self._first_seen.setdefault(iid, now)
            made += [
                Instance(
                    id=iid,
                    fleet=request.fleet,
                    pool=pool,
                    state=InstanceState.PENDING,
                    accelerator=request.offer.accelerator,
                    gpus=request.offer.gpus,
                    price_per_hour=request.offer.price_per_hour,
                    launched_at=now,
                    tags=tags,
                )
                for iid in ids
            ]
            ask = count - len(made) if len(made) == len(ids) else min(ask, count - len(made))
        return Created(made)

    def _key_name(self, fleet: str, public: str) -> str:
        """The account key to launch with, registered once per process and key (launches of
        several pools run in parallel)."""
        with self._keys_lock:
            name = self._key_names.get((fleet, public))
            if name is None:
                name = self._key_names[(fleet, public)] = keys.ensure_key(self.api, fleet, public)
            return name

    def _occupied(self, live: list[Offer]) -> list[Offer]:
        """Capacity-0 offers for pools spotfleet's instances hold; [] when the listing fails."""
        try:
            rows = [r for r in self._rows() if owner(r) and _alive(r)]
        except ProviderError as err:
            log.info("lambda: could not list instances for occupied pools: %s", err)
            return []
        return occupied_offers(rows, (o.pool.id for o in live))

    def _rows(self) -> list[Row]:
        return self.api.instances()

    def _instance(self, row: Row, now: float) -> Instance:
        with self._lock:
            first = self._first_seen.setdefault(row.id, now)
        return to_instance(row, now, first)


def _alive(row: Row) -> bool:
    return row.status not in ("terminating", "terminated")


def from_spec(spec: FleetSpec, settings: LambdaSettings) -> LambdaProvider:
    """The adapter factory the registration record names."""
    return LambdaProvider(settings)
