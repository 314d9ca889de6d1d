"""``AcmeProvider``: a thin facade over the kit (template; the flow of a REST on-demand adapter).

Instances are named ``<fleet>-<token>-<n>`` (the token finds what a crashed run made); ``launch``
runs the kit's idempotent helper; ``terminate`` touches only instances whose name carries a
spotfleet fleet. Offers come from the shipped snapshot here; a real adapter reads them live.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from fleet.catalog import snapshot_offers
from fleet.errors import InstanceNotFoundError, ProviderError
from fleet.model import Instance, InstanceState, LaunchRequest, LaunchResult, Market, Offer, PoolKey
from fleet.spec import FleetSpec, ProviderSettings
from providers._template.api import client
from providers._template.schemas import AcmeInstance, InstanceList, LaunchAnswer
from providers._template.settings import AcmeSettings
from providers.base import BucketRef, OfferQuery, StorageSpec
from providers.kit.http import JsonClient
from providers.kit.launch import Created, TokenLaunches

STATES = {"booting": InstanceState.PENDING, "active": InstanceState.RUNNING, "terminated": InstanceState.TERMINATED}


class AcmeProvider:
    name = "acme"

    def __init__(self, settings: ProviderSettings | None = None, *, api: JsonClient | None = None):
        self.settings = settings if isinstance(settings, AcmeSettings) else AcmeSettings()
        self.api = api or client()
        self._launches = TokenLaunches(self.name, clock=self.now)

    def now(self) -> float:
        return time.time()

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        return [
            o
            for o in snapshot_offers()
            if o.pool.provider == self.name
            and (not query.accelerators or o.accelerator in query.accelerators)
            and (not query.regions or o.pool.region in query.regions)
        ]

    def launch(self, request: LaunchRequest) -> LaunchResult:
        prefix = f"{request.fleet}-{request.token}"

        def find() -> list[Instance]:
            return [i for i in self._listed(request.fleet) if i.tags.get("name", "").startswith(prefix)]

        def create(n: int) -> Created:
            body = {
                "region_name": request.offer.pool.region,
                "instance_type_name": request.offer.pool.instance_type,
                "quantity": n,
                "name": prefix,
            }
            answer = self.api.request("POST", "/instances", body=body, what="launch", schema=LaunchAnswer)
            return Created([self._pending(request, iid) for iid in answer.instance_ids])

        return self._launches.launch(
            request, fingerprint=(request.offer.pool.id, request.count), find=find, create=create
        )

    def list_instances(self, fleet: str) -> list[Instance]:
        return [i for i in self._listed(fleet) if i.state is not InstanceState.TERMINATED]

    def terminate(self, ids: Sequence[str]) -> None:
        ours = {i.id for i in self._all() if i.fleet}
        doomed = [i for i in ids if i in ours]
        if doomed:
            try:
                self.api.request("POST", "/instances/terminate", body={"instance_ids": doomed}, what="terminate")
            except InstanceNotFoundError:
                pass

    def ensure_bucket(self, spec: StorageSpec) -> BucketRef:
        raise ProviderError(
            self.name, "Acme has no object storage: name an s3/gcs/azure checkpoint.provider", code="no-storage"
        )

    def _all(self) -> list[Instance]:
        rows = self.api.request("GET", "/instances", idempotent=True, what="list instances", schema=InstanceList)
        return [self._instance(r) for r in rows.data]

    def _listed(self, fleet: str) -> list[Instance]:
        return [i for i in self._all() if i.fleet == fleet]

    def _instance(self, row: AcmeInstance) -> Instance:
        fleet = row.name.rsplit("-", 2)[0] if row.name.count("-") >= 2 else ""
        pool = PoolKey(
            provider=self.name, region=row.region, zone="", instance_type=row.instance_type, market=Market.ON_DEMAND
        )
        return Instance(
            id=row.id,
            fleet=fleet,
            pool=pool,
            state=STATES.get(row.status, InstanceState.PENDING),
            accelerator="",
            gpus=0,
            price_per_hour=0.0,
            launched_at=self.now(),
            tags={"name": row.name},
        )

    def _pending(self, request: LaunchRequest, iid: str) -> Instance:
        return Instance(
            id=iid,
            fleet=request.fleet,
            pool=request.offer.pool,
            state=InstanceState.PENDING,
            accelerator=request.offer.accelerator,
            gpus=request.offer.gpus,
            price_per_hour=request.offer.price_per_hour,
            launched_at=self.now(),
            tags=dict(request.tags),
        )


def from_spec(spec: FleetSpec | None, settings: ProviderSettings) -> AcmeProvider:
    """The adapter factory the registration record names."""
    return AcmeProvider(settings)
