"""``VastProvider``: Vast.ai over its REST API, speaking the Provider protocol.

Offers come from a search (no key needed), kept ``cache_seconds`` (offers move in minutes);
when search fails, ``fleet.catalog.Catalog`` serves the snapshot, whose pools name no machine
and are refused by ``launch``. One pool is one machine's bundle (``providers.vast.offers``).

Launch (see ``providers.base`` for the contract): the label carries fleet, pool, plan, token
and count (``providers.vast.instances``); instances already under that label count towards
the request, so a rerun after a crash creates only what is missing, and a token seen in this
process returns what it returned before (destroyed instances are not recreated): the kit's
idempotent-launch helper (``providers.kit.launch``) runs these steps. A create
answered ``success: false`` with a ``new_contract`` (a bid under the minimum leaves a stopped
instance that bills storage) is destroyed at once and reported as a capacity shortfall.

Outbid instances are listed as ``stopped`` with ``reason="outbid"``, the time they were first
seen so (Vast reports no time) and the storage they still bill as their price. The remedies
are :meth:`raise_bid` (within the caps) and :meth:`destroy`; the caller chooses.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from fleet.errors import InstanceNotFoundError, NoCapacityError, ProviderError
from fleet.model import BilledRate, Instance, InstanceState, LaunchRequest, LaunchResult, Market, Offer, PoolKey
from fleet.spec import FleetSpec
from providers.base import BucketRef, OfferQuery, StorageSpec
from providers.kit.launch import Created, Shortfall, TokenLaunches
from providers.kit.node_store import missing_credentials, node_disk_bucket, store_settings
from providers.kit.terminate import end_each, owned_alive
from providers.vast.api import VastApi
from providers.vast.instances import Label, billed_rate, to_instance
from providers.vast.launch import create_body, label_for
from providers.vast.offers import Ask, parse_instance_type, rebid, search_body, to_offer
from providers.vast.schemas import CreateAnswer, InstancePage, InstanceShow, OfferPage
from providers.vast.settings import VastSettings

log = logging.getLogger(__name__)

PAGE_SIZE = 25
#: Where checkpoints live on a Vast node when no object store is named (kept while stopped).
NODE_CHECKPOINT_DIR = "/workspace/spotfleet-checkpoints"


class VastProvider:
    name = "vast"

    def __init__(
        self,
        settings: VastSettings | None = None,
        *,
        api: VastApi | None = None,
        max_per_gpu_hour: float | None = None,
        cache_seconds: float = 60.0,
        environ: Mapping[str, str] | None = None,
    ):
        self.settings = settings or VastSettings()
        self.api = api or VastApi()
        self.max_per_gpu_hour = max_per_gpu_hour
        self.cache_seconds = cache_seconds
        self._environ = environ if environ is not None else os.environ
        self._lock = threading.Lock()
        self._offers: dict[tuple, tuple[float, list[Offer]]] = {}
        self._asks: dict[str, Ask] = {}
        self._launches = TokenLaunches(self.name, clock=self.now)
        self._stopped_since: dict[str, float] = {}
        self._node_credentials: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"VastProvider({self.api!r})"

    # ---- NodesWithoutIdentity ------------------------------------------------------------
    def use_node_credentials(self, env: Mapping[str, str]) -> None:
        """The scoped checkpoint-store credentials every node launched from now on receives
        (``fleet.provisioning.node_credentials`` grants them; the operator's own never travel)."""
        with self._lock:
            self._node_credentials = dict(env)

    # ---- Provider protocol ---------------------------------------------------------------
    def now(self) -> float:
        return time.time()

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """Interruptible and on-demand offers for the query's accelerators (cached briefly),
        plus the pools this account's spotfleet instances occupy (capacity 0: rented machines
        leave the search, and the planner must still see the pools it runs in)."""
        key = (tuple(sorted(query.accelerators)), query.spot, query.on_demand)
        with self._lock:
            cached = self._offers.get(key)
        if cached is None or time.monotonic() - cached[0] > self.cache_seconds:
            found: dict[str, Offer] = {}
            markets = [m for m, on in ((Market.SPOT, query.spot), (Market.ON_DEMAND, query.on_demand)) if on]
            for market in markets:
                body = search_body(market, query.accelerators, self.settings)
                data = self.api.request(
                    "POST",
                    "/api/v0/bundles/",
                    body=body,
                    auth=False,
                    idempotent=True,
                    what=f"search {market.value} offers",
                    schema=OfferPage,
                )
                for row in data.offers:
                    self._take(found, row, market)
            for offer in self._occupied(markets):
                found.setdefault(offer.pool.id, offer)
            cached = (time.monotonic(), sorted(found.values(), key=lambda o: o.pool.id))
            with self._lock:
                self._offers[key] = cached
        accs, regions = {a.upper() for a in query.accelerators}, set(query.regions)
        return [
            o for o in cached[1] if (not accs or o.accelerator in accs) and (not regions or o.pool.region in regions)
        ]

    def launch(self, request: LaunchRequest) -> LaunchResult:
        pool = request.offer.pool
        if pool.provider != self.name:
            raise ProviderError(
                self.name, f"pool {pool.id} belongs to {pool.provider}, not vast", code="wrong-provider"
            )
        machine = parse_instance_type(pool.instance_type)
        if machine is None:
            raise ProviderError(
                self.name,
                f"pool {pool.id} comes from the offline snapshot and names no machine; "
                "run again when the Vast search answers",
                code="snapshot-pool",
            )
        refusal = missing_credentials(self.name, request.node.checkpoint_uri, self._node_credentials)
        if refusal is not None:
            raise refusal
        label = label_for(request)
        text = label.render()

        def find() -> list[Instance]:
            now = self.now()
            return [
                self._instance(r, label, now) for r in self._rows({"label": {"eq": text}}) if r.get("label") == text
            ]

        def create(_: int) -> Created:
            made, shortfall = self._create_one(request, label, machine)
            return Created((made,) if made is not None else (), shortfall)

        return self._launches.launch(request, fingerprint=label, find=find, create=create)

    def list_instances(self, fleet: str) -> list[Instance]:
        """This fleet's instances (running, pending, and stopped ones that still bill storage)."""
        now = self.now()
        out = []
        for row in self._rows({}):
            label = Label.parse(row.get("label"))
            if label is not None and label.fleet == fleet:
                out.append(self._instance(row, label, now))
        return out

    def terminate(self, ids: Sequence[str]) -> None:
        """Destroy these instances; gone is success; an instance without a spotfleet label is left alone."""
        doomed = owned_alive(
            self.name,
            ids,
            lambda: {str(r["id"]): r for r in self._rows({})},
            owned=lambda row: Label.parse(row.get("label")) is not None,
            mark="spotfleet label",
        )
        end_each(doomed, self._destroy)

    def ensure_bucket(self, spec: StorageSpec) -> BucketRef:
        """Vast has no object storage: a directory on each node's disk, which Vast keeps while an
        instance is stopped (outbid) but not after it is destroyed. Name an s3/gcs/azure
        ``checkpoint.provider`` for checkpoints that outlive an instance."""
        return node_disk_bucket(self.name, spec, NODE_CHECKPOINT_DIR)

    # ---- ReadsBilledRate ------------------------------------------------------------------
    def billed_rates(self, instances: Sequence[Instance]) -> dict[str, BilledRate]:
        """What Vast bills for these instances of ours: each row's ``dph_total`` and whether it
        is a bid (``providers.vast.instances.billed_rate``), from one filtered listing."""
        wanted = sorted({int(i.id) for i in instances if i.id.isdigit()})
        if not wanted:
            return {}
        now = self.now()
        return {
            str(row["id"]): billed_rate(row, now)
            for row in self._rows({"id": {"in": wanted}})
            if row.get("id") in wanted and Label.parse(row.get("label")) is not None
        }

    # ---- outbid remedies -------------------------------------------------------------------
    def outbid(self, fleet: str) -> list[Instance]:
        """The fleet's instances that lost their machine to a higher bid (stopped, billing storage)."""
        return [i for i in self.list_instances(fleet) if i.reason == "outbid"]

    def raise_bid(self, instance_id: str, price: float | None = None) -> float:
        """Bid again for an outbid instance: ``price``, or the machine's new ``min_bid`` plus the
        margin; never above the caps. Returns the bid. Raises ProviderError when the minimum is
        now over the caps (destroy it instead) or the instance is not one of ours."""
        row = self.api.request(
            "GET",
            f"/api/v0/instances/{instance_id}/",
            params={"owner": "me"},
            idempotent=True,
            what=f"show instance {instance_id}",
            schema=InstanceShow,
        ).row()
        if not row or Label.parse(row.get("label")) is None:
            raise ProviderError(self.name, f"instance {instance_id} is not a spotfleet instance", code="not-ours")
        gpus = int(row.get("num_gpus") or 1)
        storage = float(row.get("storage_cost") or 0) * float(row.get("disk_space") or 0) / 730.0
        dph_base = float(row.get("dph_base") or 0)
        best = rebid(float(row.get("min_bid") or 0), dph_base, gpus, storage, self.settings.bid, self.max_per_gpu_hour)
        if best is None:
            raise ProviderError(
                self.name,
                f"instance {instance_id}: the minimum bid {row.get('min_bid')} is over the "
                "caps (bid.max_fraction_of_on_demand, budget.max_per_gpu_hour); destroy it instead",
                code="bid-over-cap",
            )
        bid = best if price is None else min(price, best)
        self.api.request(
            "PUT",
            f"/api/v0/instances/bid_price/{instance_id}/",
            body={"client_id": "me", "price": bid},
            what=f"change bid of {instance_id}",
        )
        self._stopped_since.pop(str(instance_id), None)
        return bid

    def destroy(self, instance_id: str) -> None:
        """Destroy one instance of ours (the other remedy for an outbid one); gone is success."""
        self.terminate([instance_id])

    # ---- internals -----------------------------------------------------------------------
    def _take(self, found: dict[str, Offer], row: dict[str, Any], market: Market) -> None:
        try:
            mapped = to_offer(row, market, self.settings, self.max_per_gpu_hour)
        except (KeyError, TypeError, ValueError):
            return
        if mapped is None:
            return
        offer, ask = mapped
        old = found.get(offer.pool.id)
        if old is None or offer.price_per_hour < old.price_per_hour:
            found[offer.pool.id] = offer
            with self._lock:
                self._asks[offer.pool.id] = ask

    def _occupied(self, markets: list[Market]) -> list[Offer]:
        """Offers (capacity 0) for pools our labelled instances hold; [] without a key or on failure."""
        if not self.api.has_key:
            return []
        try:
            rows = self._rows({})
        except ProviderError as err:
            log.info("vast: could not list instances for occupied pools: %s", err)
            return []
        out = []
        for row in rows:
            label = Label.parse(row.get("label"))
            if label is None or PoolKey.from_id(label.pool).market not in markets:
                continue
            market = PoolKey.from_id(label.pool).market
            # valued as the search valued it when we rented: the same bid rule on the row's prices
            ask = {**row, "id": row.get("id"), "reliability2": row.get("reliability2", self.settings.min_reliability)}
            try:
                mapped = to_offer(ask, market, self.settings, self.max_per_gpu_hour)
            except (KeyError, TypeError, ValueError):
                mapped = None
            if mapped is not None and mapped[0].pool.id == label.pool:
                out.append(mapped[0].model_copy(update={"capacity_hint": 0}))
        return out

    def _ask_for(self, request: LaunchRequest, machine: tuple[int, int]) -> Ask | None:
        pool = request.offer.pool
        with self._lock:
            ask = self._asks.get(pool.id)
        if ask is not None:
            return ask
        gpus, machine_id = machine
        body = {
            **search_body(pool.market, (request.offer.accelerator,), self.settings),
            "machine_id": {"eq": machine_id},
            "num_gpus": {"eq": gpus},
        }
        data = self.api.request(
            "POST",
            "/api/v0/bundles/",
            body=body,
            auth=False,
            idempotent=True,
            what=f"search machine {machine_id}",
            schema=OfferPage,
        )
        found: dict[str, Offer] = {}
        for row in data.offers:
            self._take(found, row, pool.market)
        with self._lock:
            return self._asks.get(pool.id)

    def _create_one(
        self, request: LaunchRequest, label: Label, machine: tuple[int, int]
    ) -> tuple[Instance | None, Shortfall | None]:
        """Rent one instance; (instance, None) or (None, the capacity shortfall)."""
        pool = request.offer.pool
        ask = self._ask_for(request, machine)
        if ask is None:
            return None, Shortfall(
                "capacity",
                "no_such_ask",
                f"machine {machine[1]} offers no {pool.market.value} {machine[0]}-GPU bundle now",
            )
        with self._lock:
            secrets = {**store_settings(request.node.checkpoint_uri, self._environ), **self._node_credentials}
        body = create_body(request, label, ask.bid, self.settings.disk_gb, secrets)
        try:
            data = self.api.request(
                "PUT", f"/api/v0/asks/{ask.ask_id}/", body=body, what=f"create on ask {ask.ask_id}", schema=CreateAnswer
            )
        except NoCapacityError as err:
            self._forget_ask(pool.id)
            return None, Shortfall("capacity", err.code, str(err))
        contract = data.new_contract
        if data.success is False or not contract:
            if contract:  # a refused bid still left a stopped instance that bills storage
                self._destroy(str(contract))
            self._forget_ask(pool.id)
            code = str(data.error or "bid_refused")
            return None, Shortfall(
                "capacity",
                code,
                f"vast: bid {ask.bid} on machine {ask.machine_id} refused "
                f"({data.msg or code}); the instance it left ({contract or 'none'}) was destroyed",
            )
        price = (ask.bid if ask.bid is not None else ask.dph_base) + ask.storage_per_hour
        tags = {**request.tags, "spotfleet:fleet": request.fleet, "spotfleet:pool": pool.id}
        return Instance(
            id=str(contract),
            fleet=request.fleet,
            pool=pool,
            state=InstanceState.PENDING,
            accelerator=request.offer.accelerator,
            gpus=request.offer.gpus,
            price_per_hour=round(price, 6),
            launched_at=self.now(),
            tags=tags,
        ), None

    def _instance(self, row: Mapping[str, Any], label: Label, now: float) -> Instance:
        iid = str(row["id"])
        inst = to_instance(row, label, now, self._stopped_since.get(iid))
        if inst.state is InstanceState.STOPPED:
            with self._lock:
                self._stopped_since.setdefault(iid, now)
        return inst

    def _rows(self, select_filters: dict[str, Any]) -> list[dict[str, Any]]:
        """Every instance row of the account matching ``select_filters``, following ``next_token``."""
        params: dict[str, Any] = {
            "select_filters": select_filters,
            "order_by": [{"col": "id", "dir": "asc"}],
            "limit": PAGE_SIZE,
        }
        rows: list[dict[str, Any]] = []
        for _ in range(10_000):
            page = self.api.request(
                "GET", "/api/v1/instances/", params=params, idempotent=True, what="list instances", schema=InstancePage
            )
            rows.extend(page.rows())
            token = page.next_token
            if not token:
                return rows
            params["after_token"] = token
        raise ProviderError(self.name, "list instances: paging did not end", code="paging")

    def _destroy(self, iid: str) -> None:
        try:
            self.api.request("DELETE", f"/api/v0/instances/{iid}/", body={}, what=f"destroy {iid}")
        except InstanceNotFoundError:
            pass
        self._stopped_since.pop(iid, None)

    def _forget_ask(self, pool_id: str) -> None:
        with self._lock:
            self._asks.pop(pool_id, None)


def from_spec(spec: FleetSpec, settings: VastSettings) -> VastProvider:
    """The adapter factory the registration record names (the spec's $/GPU-h cap also caps bids)."""
    return VastProvider(settings, max_per_gpu_hour=spec.budget.max_per_gpu_hour)
