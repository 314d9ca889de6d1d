"""``OciProvider``: Oracle Cloud Infrastructure Compute through the ``oci`` SDK, speaking the Provider protocol.

* Offers: the GPU shapes each availability domain of the region lists for the compartment
  (``providers.oci.offers``), cached ``cache_seconds``; when the API fails, ``fleet.catalog``
  serves the snapshot, whose pools name no AD: ``launch`` then tries the region's ADs in order.
* Launch (contract in ``providers.base``; shape in ``providers.kit.launch``): instances are made
  one LaunchInstance each, each with its slot's ``opc-retry-token`` (OCI answers a repeated token
  with the first instance) and freeform tags naming fleet, pool, token and slot. Instances
  already tagged with the token count towards the request; new ones take slots above every slot
  the token used, so a token never revisits a slot whose instance ended. "Out of host capacity"
  moves to the next AD of a zoneless pool, else it is the capacity shortfall; a service limit
  (``LimitExceeded``) is the quota shortfall.
* List and terminate read ``ListInstances`` of the compartment: only instances tagged with the
  fleet are the fleet's; terminated ones OCI still shows are left out; an untagged instance is
  never terminated. Terminate is idempotent (gone or already terminating is success).
* Nodes have no identity for the fleet's bucket, so they get the scoped credentials ``fleet up``
  grants (``NodesWithoutIdentity``); preemption gives no notice (``fleet.agent.oci``).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.errors import InstanceNotFoundError, NoCapacityError, ProviderError
from fleet.model import BilledRate, Instance, LaunchRequest, LaunchResult, Market, Offer
from providers.base import BucketRef, OfferQuery, StorageSpec
from providers.kit.launch import Created, Shortfall, TokenLaunches
from providers.kit.node_store import missing_credentials, store_settings
from providers.kit.ssh_keys import default_home, fleet_public_key
from providers.kit.terminate import end_each, owned_alive
from providers.oci.api import OciApi
from providers.oci.instances import TAG_TOKEN, alive, fleet_of, retry_token, slot_of, to_instance, to_oci_key, token_tag
from providers.oci.launch import image_for, launch_details, node_metadata
from providers.oci.offers import ShapePrice, offers_for, shape_prices
from providers.oci.schemas import InstanceRow
from providers.oci.settings import OciSettings

if TYPE_CHECKING:
    from fleet.spec import FleetSpec

log = logging.getLogger(__name__)

#: Where checkpoints live on an OCI node when no object store is named (lost with the node).
NODE_CHECKPOINT_DIR = "/var/lib/spotfleet/checkpoints"
_BUCKET = re.compile(r"^[A-Za-z0-9._-]{1,256}$")


class OciProvider:
    name = "oci"

    def __init__(
        self,
        settings: OciSettings,
        api: OciApi,
        *,
        cache_seconds: float = 300.0,
        home: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ):
        self.settings = settings
        self.api = api
        self.cache_seconds = cache_seconds
        self._environ = environ if environ is not None else os.environ
        self._home = home or default_home(self._environ)
        self._lock = threading.Lock()
        self._offers: tuple[float, list[Offer]] | None = None
        self._zones: list[str] | None = None
        self._prices: dict[str, ShapePrice] = shape_prices()
        self._launches = TokenLaunches(self.name, clock=self.now)
        self._node_credentials: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"OciProvider({self.api!r})"

    @property
    def region(self) -> str:
        """The one region this adapter serves (the settings', else the SDK profile's)."""
        return self.settings.region or self.api.region

    # ---- NodesWithoutIdentity ------------------------------------------------------------
    def use_node_credentials(self, env: Mapping[str, str]) -> None:
        """The scoped checkpoint-store credentials every node launched from now on receives."""
        with self._lock:
            self._node_credentials = dict(env)

    # ---- Provider protocol ---------------------------------------------------------------
    def now(self) -> float:
        return time.time()

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """The priced GPU shapes of every availability domain the settings allow (cached)."""
        with self._lock:
            cached = self._offers
        if cached is None or time.monotonic() - cached[0] > self.cache_seconds:
            found: list[Offer] = []
            for zone in self.zones():
                if not self.settings.allows(self.region, zone):
                    continue
                for row in self.api.shapes(self.settings.compartment_id, zone):
                    if row.gpus:
                        found += offers_for(
                            self.region,
                            zone,
                            row.shape,
                            self._prices,
                            spot=self.settings.spot,
                            on_demand=self.settings.on_demand,
                        )
            cached = (time.monotonic(), sorted(found, key=lambda o: o.pool.id))
            with self._lock:
                self._offers = cached
        accs, regions = {a.upper() for a in query.accelerators}, set(query.regions)
        markets = {m for m, on in ((Market.SPOT, query.spot), (Market.ON_DEMAND, query.on_demand)) if on}
        return [
            o
            for o in cached[1]
            if (not accs or o.accelerator in accs) and o.market in markets and (not regions or o.pool.region in regions)
        ]

    def launch(self, request: LaunchRequest) -> LaunchResult:
        pool = request.offer.pool
        if pool.provider != self.name:
            raise ProviderError(self.name, f"pool {pool.id} belongs to {pool.provider}, not oci", code="wrong-provider")
        if pool.region != self.region:
            raise ProviderError(
                self.name,
                f"pool {pool.id} is in {pool.region}, but this OCI profile and settings serve {self.region}",
                region=pool.region,
                code="wrong-region",
            )
        missing = self.settings.missing()
        if missing:
            raise ProviderError(
                self.name,
                f"cannot launch without {', '.join(missing)}: set the OCIDs of the "
                "compartment, subnet and GPU image under providers.oci",
                code="missing-settings",
            )
        with self._lock:
            refusal = missing_credentials(self.name, request.node.checkpoint_uri, self._node_credentials)
        if refusal is not None:
            raise refusal
        tag = token_tag(request.token)
        fingerprint = (pool.id, request.count, request.offer.price_per_hour)
        state: dict[str, int] = {}

        def find() -> list[Instance]:
            rows = self._token_rows(tag)
            used = [s for s in (slot_of(r) for r in rows) if s is not None]
            state["next"] = max(used, default=-1) + 1
            return [self._instance(r) for r in rows if alive(r)]

        def create(n: int) -> Created:
            return self._create(request, n, state)

        return self._launches.launch(request, fingerprint=fingerprint, find=find, create=create)

    def list_instances(self, fleet: str) -> list[Instance]:
        """This fleet's live instances (terminating and terminated ones are left out)."""
        return [
            self._instance(r)
            for r in self.api.instances(self.settings.compartment_id)
            if fleet_of(r) == fleet and alive(r)
        ]

    def billed_rates(self, instances: Sequence[Instance]) -> dict[str, BilledRate]:
        """What Oracle lists for these instances of ours (``providers.base.ReadsBilledRate``): OCI
        has no per-instance rate nor a price API in its SDK, so it is the shape's list price from
        the shipped catalog (``providers.oci.offers.shape_prices``; preemptible when the instance
        has a ``preemptibleInstanceConfig``, which OCI bills at its preemptible price), source
        ``list``, rental ``spot``/``on-demand``; one ListInstances. An instance that is gone,
        terminating or not ours, or a shape the catalog does not price, is left out."""
        wanted = {i.id for i in instances}
        if not wanted:
            return {}
        now = self.now()
        out: dict[str, BilledRate] = {}
        for row in self.api.instances(self.settings.compartment_id):
            price = self._prices.get(row.shape)
            if row.id not in wanted or not fleet_of(row) or not alive(row) or price is None:
                continue
            spot = row.preemptible_instance_config is not None
            rate = price.preemptible if spot else price.on_demand
            if rate is not None:
                out[row.id] = BilledRate(per_hour=rate, source="list", rental="spot" if spot else "on-demand", at=now)
        return out

    def terminate(self, ids: Sequence[str]) -> None:
        """Terminate these instances with their boot volumes; gone is success; untagged ones are left alone."""
        doomed = owned_alive(
            self.name,
            ids,
            lambda: {r.id: r for r in self.api.instances(self.settings.compartment_id)},
            owned=fleet_of,
            alive=alive,
        )
        end_each(doomed, self._terminate_one)

    def ensure_bucket(self, spec: StorageSpec) -> BucketRef:
        """A directory on each node's boot volume, lost with the node: name an ``s3`` or ``azure``
        ``checkpoint.provider`` for checkpoints that outlive a preempted node (the node receives
        scoped credentials for it). The name follows Object Storage's rule (letters, digits, ``-_.``)."""
        if not _BUCKET.match(spec.bucket):
            raise ProviderError(
                self.name,
                f"bucket name {spec.bucket!r} is not valid: use 1-256 letters, digits, dashes, underscores and dots",
                code="invalid-bucket-name",
            )
        return BucketRef(provider=self.name, bucket=spec.bucket, uri=f"file://{NODE_CHECKPOINT_DIR}/{spec.bucket}")

    # ---- internals -----------------------------------------------------------------------
    def zones(self) -> list[str]:
        """The region's availability domains, read once."""
        with self._lock:
            if self._zones is not None:
                return self._zones
        names = sorted(
            ad.name for ad in self.api.availability_domains(self.settings.compartment_id or self.api.tenancy)
        )
        if not names:
            raise ProviderError(
                self.name, "the region lists no availability domain", region=self.region, code="no-availability-domains"
            )
        with self._lock:
            self._zones = names
        return names

    def _token_rows(self, tag: str) -> list[InstanceRow]:
        key = to_oci_key(TAG_TOKEN)
        return [r for r in self.api.instances(self.settings.compartment_id) if (r.freeform_tags or {}).get(key) == tag]

    def _create(self, request: LaunchRequest, n: int, state: dict[str, int]) -> Created:
        pool = request.offer.pool
        with self._lock:
            secrets = {**store_settings(request.node.checkpoint_uri, self._environ), **self._node_credentials}
        ssh_key = request.node.ssh_key or fleet_public_key(self._home, request.fleet)
        metadata = node_metadata(request, ssh_key, secrets)
        zones = [pool.zone] if pool.zone else [z for z in self.zones() if self.settings.allows(self.region, z)]
        image = image_for(request, self.settings.image_id)
        made: list[Instance] = []
        full: NoCapacityError | None = None
        for zone in zones:
            while len(made) < n:
                slot = state["next"]
                details = launch_details(
                    request,
                    zone=zone,
                    slot=slot,
                    compartment_id=self.settings.compartment_id,
                    subnet_id=self.settings.subnet_id,
                    image_id=image,
                    metadata=metadata,
                )
                try:
                    row = self.api.launch(details, retry_token(request.token, slot))
                except NoCapacityError as err:
                    full = err
                    break
                except ProviderError as err:
                    if not made:
                        raise
                    return Created(made, Shortfall.of(err))
                state["next"] = slot + 1
                made.append(self._instance(row, pool_zone=zone))
            if len(made) >= n:
                break
        if len(made) < n and full is not None:
            return Created(made, Shortfall.of(full))
        return Created(made)

    def _instance(self, row: InstanceRow, pool_zone: str = "") -> Instance:
        price = self._prices.get(row.shape)
        inst = to_instance(row, self.region, price.accelerator if price else "", price.gpus if price else 0)
        if pool_zone and not inst.pool.zone:
            inst = inst.model_copy(update={"pool": inst.pool.model_copy(update={"zone": pool_zone})})
        return inst

    def _terminate_one(self, iid: str) -> None:
        try:
            self.api.terminate(iid)
        except InstanceNotFoundError:
            pass


def from_spec(spec: FleetSpec, settings: OciSettings) -> OciProvider:
    """The adapter for ``spec``'s ``providers.oci`` settings: the SDK config they name (read when the
    adapter first calls OCI), the endpoint of ``$SPOTFLEET_OCI_ENDPOINT`` if set."""
    return OciProvider(
        settings, OciApi(config_file=settings.config_file, profile=settings.profile, region=settings.region)
    )
