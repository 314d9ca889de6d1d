"""``RunPodProvider``: on-demand RunPod pods over REST API v2, speaking the Provider protocol.

Offers come from the GPU catalog (``providers.runpod.offers``), kept ``cache_seconds``; when it
fails, ``fleet.catalog.Catalog`` serves the snapshot, whose RunPod pools are launchable as they
stand (the same naming). RunPod sells no interruptible pods through its current API: no spot offer
is made (the snapshot's RunPod spot rows carry ``capacity_hint=0``, ``fleet.catalog``), and RunPod is a no-notice provider: a node keeps its work by periodic checkpoints to the fleet's
bucket, and a lost pod is seen from its status (``EXITED``/``ERROR``, listed as stopped, reason ``lost``).

Launch (``providers.kit.launch.TokenLaunches``): each pod carries the label of the request
(``providers.runpod.instances``), so pods already under the label count towards it and a rerun
after a crash creates only what is missing. One ``POST /v2/pods`` per pod, pinned to the pool's
data center; a ``400`` "no instances available" is a capacity shortfall, a ``402`` (balance) a
quota one. Terminate and ``fleet down`` delete only pods whose label is spotfleet's.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from fleet.catalog import snapshot_offers
from fleet.errors import AuthError, InstanceNotFoundError, NoCapacityError, ProviderError
from fleet.model import (
    TAG_FLEET,
    TAG_POOL,
    BilledRate,
    Instance,
    InstanceState,
    LaunchRequest,
    LaunchResult,
    Market,
    Offer,
)
from providers.base import BucketRef, OfferQuery, StorageSpec
from providers.kit.launch import Created, Shortfall, TokenLaunches
from providers.kit.node_store import missing_credentials, node_disk_bucket, store_settings
from providers.kit.rented import Label
from providers.kit.terminate import end_each, owned_alive
from providers.runpod.api import client
from providers.runpod.instances import billed_rate, is_lost, label_of, to_instance
from providers.runpod.launch import create_body
from providers.runpod.offers import parse_instance_type, to_offers
from providers.runpod.schemas import GpuList, Pod, PodList
from providers.runpod.settings import RunPodSettings

if TYPE_CHECKING:
    from fleet.spec import FleetSpec, ProviderSettings
    from providers.kit.http import JsonClient
    from providers.runpod.offers import PodShape

log = logging.getLogger(__name__)

#: Where checkpoints live on a pod when no object store is named (lost with the pod).
NODE_CHECKPOINT_DIR = "/workspace/spotfleet-checkpoints"


class RunPodProvider:
    name = "runpod"

    def __init__(
        self,
        settings: RunPodSettings | None = None,
        *,
        api: JsonClient | None = None,
        cache_seconds: float = 60.0,
        environ: Mapping[str, str] | None = None,
    ):
        self.settings = settings or RunPodSettings()
        self.api = api or client()
        self.cache_seconds = cache_seconds
        self._environ = environ if environ is not None else os.environ
        self._lock = threading.Lock()
        self._offers: tuple[float, list[Offer]] | None = None
        self._launches = TokenLaunches(self.name, clock=self.now)
        self._lost_since: dict[str, float] = {}
        self._node_credentials: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"RunPodProvider({self.api!r})"

    # ---- NodesWithoutIdentity ------------------------------------------------------------
    def use_node_credentials(self, env: Mapping[str, str]) -> None:
        """The scoped checkpoint-store credentials every pod launched from now on receives."""
        with self._lock:
            self._node_credentials = dict(env)

    # ---- Provider protocol ---------------------------------------------------------------
    def now(self) -> float:
        return time.time()

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """On-demand offers of the allowed clouds (cached briefly); no spot ones (none are sold)."""
        with self._lock:
            cached = self._offers
        if cached is None or time.monotonic() - cached[0] > self.cache_seconds:
            cached = (time.monotonic(), self._fetch_offers())
            with self._lock:
                self._offers = cached
        accs, regions = {a.upper() for a in query.accelerators}, set(query.regions)
        return [
            o
            for o in cached[1]
            if (not accs or o.accelerator in accs)
            and (not regions or o.pool.region in regions)
            and (query.spot or o.market is not Market.SPOT)
            and (query.on_demand or o.market is not Market.ON_DEMAND)
        ]

    def launch(self, request: LaunchRequest) -> LaunchResult:
        pool = request.offer.pool
        if pool.provider != self.name:
            raise ProviderError(
                self.name, f"pool {pool.id} belongs to {pool.provider}, not runpod", code="wrong-provider"
            )
        if pool.market is not Market.ON_DEMAND:
            raise ProviderError(
                self.name,
                f"pool {pool.id}: RunPod's API sells no interruptible pods; plan on-demand RunPod pools",
                code="no-interruptible",
            )
        shape = parse_instance_type(pool.instance_type)
        if shape is None:
            raise ProviderError(self.name, f"pool {pool.id} names no RunPod pod shape", code="invalid-pool")
        if shape.cloud not in self.settings.clouds:
            raise ProviderError(
                self.name,
                f"pool {pool.id} is in the {shape.cloud} cloud, which providers.runpod.clouds leaves out",
                code="cloud-not-allowed",
            )
        refusal = missing_credentials(self.name, request.node.checkpoint_uri, self._node_credentials)
        if refusal is not None:
            raise refusal
        label = Label.of(request)
        text = label.render()

        def find() -> list[Instance]:
            now = self.now()
            return [self._instance(p, label, now) for p in self._pods() if _label_text(p) == text and not is_lost(p)]

        def create(n: int) -> Created:
            made: list[Instance] = []
            for _ in range(n):
                try:
                    made.append(self._create_one(request, shape, label))
                except NoCapacityError as err:  # a quota (402 balance) refusal is raised: no pool helps
                    return Created(made, Shortfall.of(err))
            return Created(made)

        return self._launches.launch(request, fingerprint=text, find=find, create=create)

    def list_instances(self, fleet: str) -> list[Instance]:
        """This fleet's pods: pending, running, and lost ones (``EXITED``/``ERROR``, still billing disk)."""
        now = self.now()
        out = []
        for pod in self._pods():
            label = label_of(pod)
            if label is not None and label.fleet == fleet:
                out.append(self._instance(pod, label, now))
        return out

    def terminate(self, ids: Sequence[str]) -> None:
        """Delete these pods; gone is success; a pod without a spotfleet label is left alone."""
        doomed = owned_alive(
            self.name,
            ids,
            lambda: {p.id: p for p in self._pods()},
            owned=lambda pod: label_of(pod) is not None,
            noun="pod",
            mark="spotfleet label",
        )
        end_each(doomed, self._delete)

    # ---- ReadsBilledRate ------------------------------------------------------------------
    def billed_rates(self, instances: Sequence[Instance]) -> dict[str, BilledRate]:
        """What RunPod bills for these pods of ours (their ``cost``), from one listing; a pod
        that is gone or lost is left out."""
        wanted = {i.id for i in instances}
        now = self.now()
        return {
            pod.id: billed_rate(pod, now)
            for pod in self._pods()
            if pod.id in wanted and label_of(pod) is not None and pod.status in ("PROVISIONING", "STARTING", "RUNNING")
        }

    def ensure_bucket(self, spec: StorageSpec) -> BucketRef:
        """RunPod sells no object store this adapter uses: a directory on the pod's disk, lost with
        the pod. Name an s3/gcs/azure ``checkpoint.provider`` for checkpoints that outlive a pod."""
        return node_disk_bucket(self.name, spec, NODE_CHECKPOINT_DIR)

    # ---- internals -----------------------------------------------------------------------
    def _fetch_offers(self) -> list[Offer]:
        shapes = {
            o.pool.instance_type: (o.vcpus, o.memory_gib) for o in snapshot_offers() if o.pool.provider == self.name
        }
        found: dict[str, Offer] = {}
        for cloud in self.settings.clouds:
            data = self.api.request(
                "GET",
                "/v2/catalog/gpus",
                params={"include": "AVAILABILITY", "product": "POD", "cloud": cloud},
                idempotent=True,
                what=f"list {cloud} GPU types",
                schema=GpuList,
            )
            for gpu in data.gpus:
                for offer in to_offers(gpu, cloud, shapes):
                    found.setdefault(offer.pool.id, offer)
        return sorted(found.values(), key=lambda o: o.pool.id)

    def _create_one(self, request: LaunchRequest, shape: PodShape, label: Label) -> Instance:
        with self._lock:
            secrets = {**store_settings(request.node.checkpoint_uri, self._environ), **self._node_credentials}
        body = create_body(request, shape, label, self.settings.disk_gb, secrets)
        what = f"create {shape.count} x {shape.gpu_id} pod in {request.offer.pool.zone}"
        try:
            pod = self.api.request("POST", "/v2/pods", body=body, schema=Pod, what=what)
        except AuthError as err:
            if err.code != "forbidden":
                raise
            # on a create, RunPod's 403 is "your account cannot access the requested pool": skip it
            raise NoCapacityError(self.name, str(err.message), code="pool-forbidden") from None
        tags = {**request.tags, TAG_FLEET: request.fleet, TAG_POOL: request.offer.pool.id}
        price = request.offer.price_per_hour  # the planned rate; what RunPod bills is read back
        state = InstanceState.RUNNING if pod.status == "RUNNING" else InstanceState.PENDING
        return Instance(
            id=pod.id,
            fleet=request.fleet,
            pool=request.offer.pool,
            state=state,
            accelerator=request.offer.accelerator,
            gpus=shape.count,
            price_per_hour=round(price, 6),
            launched_at=self.now(),
            tags=tags,
        )

    def _instance(self, pod: Pod, label: Label, now: float) -> Instance:
        inst = to_instance(pod, label, now, self._lost_since.get(pod.id))
        if inst.state is InstanceState.STOPPED:
            with self._lock:
                self._lost_since.setdefault(pod.id, now)
        return inst

    def _pods(self) -> list[Pod]:
        return self.api.request("GET", "/v2/pods", idempotent=True, what="list pods", schema=PodList).pods

    def _delete(self, pod_id: str) -> None:
        try:
            self.api.request("DELETE", f"/v2/pods/{pod_id}", idempotent=True, what=f"delete pod {pod_id}")
        except InstanceNotFoundError:
            pass
        with self._lock:
            self._lost_since.pop(pod_id, None)


def from_spec(spec: FleetSpec, settings: ProviderSettings) -> RunPodProvider:
    """The adapter for ``spec`` (the registration record's factory)."""
    return RunPodProvider(settings if isinstance(settings, RunPodSettings) else RunPodSettings())


def _label_text(pod: Pod) -> str:
    label = label_of(pod)
    return label.render() if label is not None else ""
