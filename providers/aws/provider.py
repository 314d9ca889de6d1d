"""``AwsProvider``: EC2 spot and on-demand capacity and S3 checkpoint storage behind the Provider protocol.

Regions are the spec's ``providers.aws.regions`` (else every region of the shipped snapshot,
minus ``exclude_regions``); calls to different regions run in parallel. See ``offers``,
``launch``, ``instances`` and ``storage`` for each part's contract.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from fleet.errors import ProviderError
from fleet.model import BilledRate, Instance, LaunchRequest, LaunchResult, Offer
from fleet.spec import FleetSpec
from providers.aws import advisor, billing, instances, interconnect, interruptions, node_credentials, offers, storage
from providers.aws.launch import Launcher
from providers.aws.session import Aws
from providers.aws.settings import AwsSettings
from providers.base import BucketRef, Interruption, OfferQuery, StorageSpec

T = TypeVar("T")
log = logging.getLogger(__name__)
CACHE_ENV = "SPOTFLEET_CACHE_DIR"
OFFER_TTL_SECONDS = 600.0


def cache_dir() -> Path:
    """Where live offer facts and the Spot Advisor data are cached (``$SPOTFLEET_CACHE_DIR``)."""
    root = os.environ.get(CACHE_ENV) or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "spotfleet")
    return Path(root).expanduser() / "aws"


class AwsProvider:
    name = "aws"

    def __init__(
        self,
        settings: AwsSettings | None = None,
        *,
        aws: Aws | None = None,
        refresh_offers: bool = False,
        offer_ttl: float = OFFER_TTL_SECONDS,
        interruption_queue: bool = False,
    ):
        self.settings = settings or AwsSettings()
        self.interruption_queue = interruption_queue
        self._queues: dict[tuple[str, str], str] = {}  # (region, fleet) -> queue URL made this process
        self._queue_lock = threading.Lock()
        self.aws = aws or Aws()
        self.launcher = Launcher(self.aws, self.settings)
        self.cache = offers.OfferCache(cache_dir(), offer_ttl)
        self.refresh_offers = refresh_offers

    def __repr__(self) -> str:
        return f"AwsProvider(regions={self.regions()})"

    def regions(self) -> list[str]:
        wanted = self.settings.regions or offers.snapshot_regions()
        return [r for r in wanted if r not in self.settings.exclude_regions]

    # ---- Provider protocol ---------------------------------------------------------------
    def now(self) -> float:
        return time.time()

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        """Live offers per zone; parts that fail come from the snapshot (named in ``Offer.source``).

        Raises AuthError without credentials (the catalog then serves the whole snapshot)."""
        self.aws.require_credentials()
        regions = [r for r in self.regions() if not query.regions or r in query.regions]
        if not regions:
            return []
        facts = offers.region_facts(self.aws, regions, self.cache, refresh=self.refresh_offers)
        doc = advisor.load(self.cache.root) if query.spot else None
        out: list[Offer] = []
        for f in facts:
            out.extend(offers.to_offers(f, query, advisor.rates(doc, f.region), self.settings.allows))
        return out

    def launch(self, request: LaunchRequest) -> LaunchResult:
        """Launch (``providers.aws.launch``); with the interruption queue on, the region's queue is
        made first (once per process), so notices of what this launches are caught; a queue that
        cannot be made is logged and does not stop the launch (the watcher tries again)."""
        if self.interruption_queue:
            try:
                self._queue(request.offer.pool.region, request.fleet)
            except ProviderError as err:
                log.warning(
                    "aws/%s: cannot make fleet %s's interruption queue: %s",
                    request.offer.pool.region,
                    request.fleet,
                    err,
                )
        return self.launcher.launch(request)

    def list_instances(self, fleet: str) -> list[Instance]:
        """The fleet's instances in every region (alive, stopped, and spot instances AWS took back).
        The first look per region and process also deletes the fleet's launch templates that
        CreateFleet already used (left by a run killed before its cleanup: ``Launcher.sweep_once``)."""

        def region(r: str) -> list[Instance]:
            self.launcher.sweep_once(r, fleet)
            return instances.list_fleet(self.aws, r, fleet)

        found = self._each_region(region)
        return sorted((i for part in found for i in part), key=lambda i: (i.launched_at, i.id))

    def terminate(self, ids: Sequence[str]) -> None:
        """Terminate ``ids`` wherever they are; unknown or ended ids are success; untagged ones are left."""
        ids = list(dict.fromkeys(ids))
        if ids:
            self._each_region(lambda r: instances.terminate(self.aws, r, ids))

    def ensure_bucket(self, spec: StorageSpec) -> BucketRef:
        return storage.ensure(self.aws, spec)

    # ---- ReadsBilledRate ------------------------------------------------------------------
    def billed_rates(self, instances: Sequence[Instance]) -> dict[str, BilledRate]:
        """Spot: the zone's spot price at launch; on-demand: the catalog's list price (``providers.aws.billing``)."""
        return billing.billed_rates(self.aws, instances, self.now())

    # ---- GrantsNodeCredentials -------------------------------------------------------------
    def grant_node_credentials(self, spec: StorageSpec) -> dict[str, str]:
        """A per-fleet IAM user limited to ``spec.bucket/spec.prefix`` (``providers.aws.node_credentials``)."""
        return node_credentials.ensure(
            self.aws,
            fleet=spec.fleet,
            bucket=spec.bucket,
            prefix=spec.prefix,
            region=spec.region or self.aws.default_region,
        )

    def revoke_node_credentials(self, spec: StorageSpec) -> list[str]:
        return node_credentials.revoke(self.aws, fleet=spec.fleet, region=self.aws.default_region)

    def teardown(self, fleet: str) -> list[str]:
        """Delete the launch templates ``fleet`` left in any region (a run killed between CreateFleet
        and its cleanup leaves one, user data and all) and its cluster placement groups
        (``providers.aws.interconnect``); called by ``fleet down``. Their names."""
        found = self._each_region(
            lambda r: self.launcher.remove_templates(r, fleet) + interconnect.remove(self.aws, r, fleet)
        )
        if self.interruption_queue:  # and the interruption queue with its rules (only when the fleet has one)
            found += self._each_region(lambda r: interruptions.remove(self.aws, r, fleet))
            with self._queue_lock:
                self._queues = {k: v for k, v in self._queues.items() if k[1] != fleet}
        return [name for part in found for name in part]

    # ---- ReportsInterruptions ----------------------------------------------------------------
    def poll_interruptions(self, fleet: str, regions: Sequence[str], wait_seconds: float) -> list[Interruption]:
        """EC2's spot interruption, rebalance and state-change events for ``fleet``'s instances, from
        the fleet's queue in each of ``regions`` (polled in parallel; ``providers.aws.interruptions``)."""
        wanted = sorted(set(regions))
        if not self.interruption_queue or not wanted:
            return []
        found = self._each_region(
            lambda r: interruptions.poll(self.aws, r, fleet, self._queue(r, fleet), int(wait_seconds)), wanted
        )
        return [n for part in found for n in part]

    def console_output(self, instance: Instance) -> str:
        return instances.console_output(self.aws, instance)

    # ---- internals -----------------------------------------------------------------------
    def _queue(self, region: str, fleet: str) -> str:
        """The URL of ``fleet``'s interruption queue in ``region``, made on first use in this process."""
        with self._queue_lock:
            url = self._queues.get((region, fleet))
        if url is None:
            url = interruptions.ensure(self.aws, region, fleet)
            with self._queue_lock:
                self._queues[(region, fleet)] = url
        return url

    def _each_region(self, work: Callable[[str], T], regions: Sequence[str] | None = None) -> list[T]:
        regions = self.regions() if regions is None else list(regions)
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(regions)))) as ex:
            futures = [ex.submit(work, r) for r in regions]
            results, first_error = [], None
            for fut in futures:
                try:
                    results.append(fut.result())
                except ProviderError as err:
                    first_error = first_error or err
        if first_error is not None:
            raise first_error
        return results


def from_spec(spec: FleetSpec, settings: AwsSettings) -> AwsProvider:
    """The adapter factory the registration record names (``backend: cloud``)."""
    return AwsProvider(settings, interruption_queue=spec.rebalance.interruption_queue)
