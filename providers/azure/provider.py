"""``AzureProvider``: individual Spot (and on-demand) VMs through Azure Resource Manager.

Offers: GPU sizes from Resource SKUs (restrictions respected), priced from the Retail Prices API
(``providers.azure.prices``, cached on disk) or, when it fails, the shipped snapshot
(``providers.azure.offers``), kept ``cache_seconds``. Launch (see ``providers.base`` for the
contract): ``node.image`` and ``node.ssh_key`` are checked first (an empty key means the fleet's
own key pair under ``home``, ``providers.kit.ssh_keys``), so nothing Azure would refuse is sent;
the resource group (``providers.azure.resource_group``, default ``spotfleet``; one lock and one
location for all regions, ``providers.azure.group``) and the fleet's VNet and NSG in the region
are created once and tagged; then per VM a NIC and the VM, named from
the launch token (``providers.azure.launch``), so a rerun in another process finds what exists and
creates only what is missing, and a token seen in this process returns what it returned before
(deleted VMs are not recreated). The first missing VM is created alone, the rest in parallel
(``CREATE_PARALLEL`` at a time). A capacity refusal (``AllocationFailed`` and kin) ends the launch
and is reported in the result; anything else is raised when nothing was created. Whatever a failed
creation left (a VM in ``Failed`` state, its NIC) is deleted before the launch returns.

``terminate`` deletes the VM, then its NICs that carry the fleet tag (404 = gone); a VM without a
spotfleet fleet tag is never touched. A NIC whose VM never came (a run killed between the two) is
deleted by the next launch into that region or the next terminate of that fleet. ``teardown``
(called by ``fleet down``) deletes the fleet's network in regions where none of its VMs is left.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fleet.catalog import snapshot_offers
from fleet.errors import InstanceNotFoundError, NoCapacityError, ProviderError
from fleet.model import TAG_FLEET, BilledRate, Instance, InstanceState, LaunchRequest, LaunchResult, Market, Quota
from fleet.spec import FleetSpec
from providers.azure import interconnect, node_credentials
from providers.azure.activity import deletions
from providers.azure.arm import Arm, wire
from providers.azure.billing import RetailBills, billed_rates
from providers.azure.group import ensure_group
from providers.azure.instances import to_instance
from providers.azure.launch import (
    TAG_REQUEST,
    TAG_TOKEN,
    image_reference,
    nic_body,
    nic_name,
    request_hash,
    tags_for,
    vm_body,
    vm_names,
)
from providers.azure.network import ensure_network, fleet_networks, remove_network
from providers.azure.offers import sku_places, to_offers, wanted_sizes
from providers.azure.prices import PRICES_URL_ENV, RetailPrices
from providers.azure.quotas import to_quotas
from providers.azure.settings import AzureSettings
from providers.azure.storage import AccountStorage, ensure_container, uses_connection_string
from providers.base import BucketRef, OfferQuery, StorageSpec
from providers.kit.launch import Created, Shortfall, TokenLaunches
from providers.kit.ssh_keys import check_public_key, default_home, fleet_public_key

log = logging.getLogger(__name__)

DEFAULT_RESOURCE_GROUP = "spotfleet"
#: VMs of one launch created at once (after the first, which goes alone).
CREATE_PARALLEL = 8


class AzureProvider:
    name = "azure"

    def __init__(
        self,
        settings: AzureSettings | None = None,
        *,
        arm: Arm | None = None,
        environ: Mapping[str, str] | None = None,
        cache_seconds: float = 600.0,
        prices: RetailPrices | None = None,
        live_prices: bool = True,
        home: Path | None = None,
    ):
        self.settings = settings or AzureSettings()
        self._environ = environ if environ is not None else os.environ
        self._home = home or default_home(self._environ)  # where a fleet's own SSH key pair is kept
        self.prices = prices or (RetailPrices.from_env(self._environ) if live_prices else None)
        self.bills = RetailBills(
            self.settings.prices_url
            if "prices_url" in self.settings.model_fields_set
            else self._environ.get(PRICES_URL_ENV) or self.settings.prices_url
        )
        self._arm = arm
        self.resource_group = self.settings.resource_group or DEFAULT_RESOURCE_GROUP
        self.cache_seconds = cache_seconds
        self._lock = threading.Lock()
        self._offers: tuple[float, list] | None = None
        self._ready: dict[str, str] = {}  # "group" / "<fleet>|<region>" -> subnet id
        self._launches = TokenLaunches(self.name, clock=self.now)
        self._token_locks: dict[str, threading.Lock] = {}
        self._identities: dict[str, tuple[str, str] | None] = {}  # checkpoint URI -> node identity

    @property
    def arm(self) -> Arm:
        if self._arm is None:
            self._arm = Arm.from_env(self.settings.subscription_id, self._environ)
        return self._arm

    def __repr__(self) -> str:
        return f"AzureProvider({self.arm!r}, resource_group={self.resource_group})"

    # ---- Provider protocol ---------------------------------------------------------------
    def now(self) -> float:
        return time.time()

    def list_offers(self, query: OfferQuery) -> list:
        with self._lock:
            cached = self._offers
        if cached is None or time.monotonic() - cached[0] > self.cache_seconds:
            skus = self._skus()
            cached = (time.monotonic(), to_offers(skus, snapshot_offers(), self.settings, self._live_prices(skus)))
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
                self.name, f"pool {pool.id} belongs to {pool.provider}, not azure", code="wrong-provider"
            )
        want = request_hash(request)
        missing: list[list[str]] = []  # the VM names still to create, found by find()

        def find() -> list[Instance]:
            existing = self._token_vms(request.token)
            if any((vm.get("tags") or {}).get(TAG_REQUEST) != want for vm in existing.values()):
                raise ProviderError(
                    self.name,
                    f"launch token {request.token!r} was already used with different parameters",
                    code="token-mismatch",
                )
            found, names = [], []
            for name in vm_names(request.token, request.count):
                vm = existing.get(name)
                if vm is not None and (vm.get("properties") or {}).get("provisioningState") != "Failed":
                    found.append(self._instance(vm))
                    continue
                if vm is not None:  # a Failed VM left by a run killed before its cleanup
                    self._cleanup(name)
                names.append(name)
            missing.append(names)
            return found

        def create(_: int) -> Created:
            if not missing:
                return Created()
            ssh_key = self._login_key(request)
            subnet = self._ensure_network(request.fleet, pool.region, ssh=bool(request.node.ssh_key))
            if request.interconnect:
                group = interconnect.ensure(
                    self.arm, self.resource_group, pool.region, request.interconnect, request.fleet
                )
                with self._lock:
                    self._ready[f"ppg|{request.interconnect}|{pool.region}"] = group
            made, err = self._create_many(request, missing.pop(), subnet, tags_for(request), ssh_key)
            if err is not None and not made and not isinstance(err, NoCapacityError):
                raise err  # kept as the shortfall when earlier VMs exist
            return Created(made, Shortfall.of(err) if err is not None else None)

        return self._launches.launch(
            request, fingerprint=want, find=find, create=create, alive=lambda: set(self._token_vms(request.token))
        )

    def list_instances(self, fleet: str) -> list[Instance]:
        """The fleet's VMs in the resource group (found by tag), terminated ones left out."""
        out = []
        for vm in self._vms():
            if (vm.get("tags") or {}).get(TAG_FLEET) != fleet:
                continue
            inst = self._instance(vm)
            if inst is not None and inst.state is not InstanceState.TERMINATED:
                out.append(inst)
        return out

    def billed_rates(self, instances: Sequence[Instance]) -> dict[str, BilledRate]:
        """What Azure bills for these VMs of ours: the Retail Prices API's Linux Spot or on-demand
        consumption price of each one's size in its region (``providers.azure.billing``; the
        endpoint is the ``prices_url`` setting). A VM that is gone, or whose size has no such
        price, is left out; one listing of the fleets' VMs, one price query per size."""
        fleets = sorted({i.fleet for i in instances})
        alive = {i.id for fleet in fleets for i in self.list_instances(fleet)}
        return billed_rates(self.bills, [i for i in instances if i.id in alive], self.now())

    def terminate(self, ids: Sequence[str]) -> None:
        """Delete these VMs and their tagged NICs; gone is success; untagged VMs are left alone."""
        wanted = list(dict.fromkeys(str(i) for i in ids))
        if wanted:
            with ThreadPoolExecutor(max_workers=max(1, min(8, len(wanted)))) as pool:
                fleets = set(pool.map(self._delete_vm, wanted)) - {None}
            for fleet in sorted(fleets):
                self._sweep_nics(fleet)

    def ensure_bucket(self, spec: StorageSpec) -> BucketRef:
        """Through ``$AZURE_STORAGE_CONNECTION_STRING`` when set, else through ARM with a node identity
        (``providers.azure.storage``)."""
        if uses_connection_string(self.settings, self._environ):
            return ensure_container(spec, self._environ)
        return AccountStorage(self.arm, self.resource_group, self.settings).ensure(spec)

    # ---- GrantsNodeCredentials -------------------------------------------------------------
    def grant_node_credentials(self, spec: StorageSpec) -> dict[str, str]:
        """A SAS on the fleet's container under a renewed stored policy (``providers.azure.node_credentials``)."""
        return node_credentials.ensure(self._environ, spec)

    def revoke_node_credentials(self, spec: StorageSpec) -> list[str]:
        return node_credentials.revoke(self._environ, spec)

    def teardown(self, fleet: str) -> list[str]:
        """Delete the network (VNet, NSG) ``fleet`` made in each region where none of its VMs is left,
        after its orphaned NICs there, and its proximity placement groups there
        (``providers.azure.interconnect``); only resources carrying the fleet's tag. Returns what went."""
        vms = self._vms()
        busy = {vm.get("location") for vm in vms if (vm.get("tags") or {}).get(TAG_FLEET) == fleet}
        done: list[str] = []
        for region, items in sorted(fleet_networks(self.arm, self.resource_group, fleet).items()):
            if region in busy:
                continue
            self._sweep_nics(fleet, region)
            with self._lock:
                self._ready.pop(f"{fleet}|{region}", None)
            done += remove_network(self.arm, self.resource_group, fleet, items)
        return done + interconnect.remove(self.arm, self.resource_group, fleet, busy={str(r) for r in busy})

    def quotas(self) -> list[Quota]:
        """The vCPU quotas (Spot regional, on-demand regional and per family: ``providers.azure.quotas``)
        of each allowed region where a GPU size is offered; ProviderError when the usage API fails."""
        skus = self._skus()
        regions = sorted({r for s in skus for r, z in sku_places(s) if self.settings.allows(r, z)})

        def one(region: str) -> list[Quota]:
            usages = self.arm.call(
                lambda: [wire(u) for u in self.arm.compute.usage.list(region)], f"read compute usages in {region}"
            )
            return to_quotas(region, usages, skus)

        with ThreadPoolExecutor(max_workers=max(1, min(8, len(regions)))) as pool:
            return [q for found in pool.map(one, regions) for q in found]

    def ended_at(self, ids: Sequence[str]) -> dict[str, float]:
        """When Azure deleted these VMs (an eviction under evictionPolicy Delete, or any delete), from
        the Activity Log (``providers.azure.activity``); VMs it holds no delete of are left out."""
        return deletions(self.arm, self.resource_group, [str(i) for i in ids])

    # ---- internals -----------------------------------------------------------------------
    def _skus(self) -> list[dict[str, Any]]:
        return self.arm.listing(lambda **hooks: self.arm.compute.resource_skus.list(**hooks), "list resource SKUs")

    def _live_prices(self, skus: list[dict[str, Any]]) -> dict:
        """Retail prices for the sizes the SKUs offer; {} (snapshot prices) when they cannot be had."""
        wanted = wanted_sizes(skus, snapshot_offers(), self.settings)
        if self.prices is None or not wanted:
            return {}
        try:
            return self.prices.prices(wanted)[0]
        except ProviderError as err:
            log.warning("azure: live prices unavailable, pricing from the snapshot: %s", err)
            return {}

    def _ensure_network(self, fleet: str, region: str, ssh: bool = False) -> str:
        """The subnet id of the fleet's VNet in ``region``, creating the group once (in the first of
        ``providers.azure.regions``, else in ``region``: ``providers.azure.group``) and the VNet and its
        NSG (SSH in when ``ssh``: ``providers.azure.network``) once per fleet and region.

        The first time per fleet and region in this process it also deletes the fleet's orphaned
        NICs there (:meth:`_sweep_nics`): a run killed between a NIC and its VM leaves one."""
        key = f"{fleet}|{region}"
        with self._lock:
            if key in self._ready:
                return self._ready[key]
            net_lock = self._token_locks.setdefault(f"network|{key}", threading.Lock())
        with net_lock:
            if key in self._ready:
                return self._ready[key]
            rg, arm = self.resource_group, self.arm
            if "group" not in self._ready:  # one lock and one location for every region's launch
                ensure_group(arm, rg, (self.settings.regions or [region])[0])
                self._ready["group"] = rg
            subnet = ensure_network(arm, rg, fleet, region, ssh=ssh)
            self._sweep_nics(fleet, region)
            with self._lock:
                self._ready[key] = subnet
            return subnet

    def _sweep_nics(self, fleet: str, region: str = "") -> None:
        """Delete NICs tagged with ``fleet`` whose VM does not exist, except those of launches this
        process has made or is making (their VM may be on its way)."""
        rg, arm = self.resource_group, self.arm
        try:
            nics = arm.call(lambda: [wire(n) for n in arm.network.network_interfaces.list(rg)], f"list NICs in {rg}")
        except InstanceNotFoundError:
            return
        with self._lock:
            busy = self._launches.busy()
        vms = {vm["name"] for vm in self._vms()}
        for nic in nics:
            tags = nic.get("tags") or {}
            if (
                tags.get(TAG_FLEET) != fleet
                or tags.get(TAG_TOKEN) in busy
                or (region and nic.get("location") != region)
            ):
                continue
            if nic["name"].removesuffix("-nic") in vms:
                continue
            log.info("azure: deleting NIC %s left by an interrupted launch", nic["name"])
            try:
                arm.call(
                    lambda: arm.network.network_interfaces.begin_delete(rg, nic["name"]).result(),
                    f"delete orphaned NIC {nic['name']}",
                )
            except ProviderError as err:
                log.warning("azure: could not delete orphaned NIC %s: %s", nic["name"], err)

    def _create_many(
        self, request: LaunchRequest, names: Sequence[str], subnet: str, tags: dict[str, str], ssh_key: str
    ) -> tuple[list[Instance], ProviderError | None]:
        """Create the VMs ``names`` (a NIC and a VM each): the first alone, so a refusal (capacity,
        quota, auth) costs one attempt, then the rest ``CREATE_PARALLEL`` at a time, as ARM takes
        concurrent creations. Returns what was made, in name order, and the error of the first
        name that failed (None when all were made)."""
        made: dict[str, Instance] = {}
        failed: dict[int, ProviderError] = {}

        def one(index: int) -> None:
            try:
                made[names[index]] = self._create_one(request, names[index], subnet, tags, ssh_key)
            except ProviderError as err:
                failed[index] = err

        if names:
            one(0)
        if len(names) > 1 and not failed:
            with ThreadPoolExecutor(max_workers=min(CREATE_PARALLEL, len(names) - 1)) as pool:
                list(pool.map(one, range(1, len(names))))
        return [made[n] for n in names if n in made], (failed[min(failed)] if failed else None)

    def _create_one(
        self, request: LaunchRequest, name: str, subnet: str, tags: dict[str, str], ssh_key: str
    ) -> Instance:
        """Create one NIC + VM; on any failure delete what this attempt made, then raise."""
        rg, arm, region = self.resource_group, self.arm, request.offer.pool.region
        identity = self._node_identity(request)
        with self._lock:
            group = self._ready.get(f"ppg|{request.interconnect}|{region}", "") if request.interconnect else ""
        try:
            nic = wire(
                arm.call(
                    lambda: arm.network.network_interfaces.begin_create_or_update(
                        rg, nic_name(name), nic_body(region, subnet, tags)
                    ).result(),
                    f"create NIC for {name}",
                )
            )
            vm = wire(
                arm.call(
                    lambda: arm.compute.virtual_machines.begin_create_or_update(
                        rg,
                        name,
                        vm_body(
                            request,
                            name,
                            nic["id"],
                            tags,
                            ssh_key=ssh_key,
                            eviction_policy=self.settings.eviction_policy,
                            identity=identity,
                            placement_group=group,
                        ),
                    ).result(),
                    f"create VM {name}",
                )
            )
        except ProviderError as err:
            self._cleanup(name)
            raise err
        inst = self._instance(vm)
        assert inst is not None
        return inst

    def _login_key(self, request: LaunchRequest) -> str:
        """The SSH public key the request's VMs get: ``node.ssh_key`` when set (checked), else the
        fleet's own key pair (``providers.kit.ssh_keys``), as Azure refuses a Linux VM without a
        password or a key. ``node.image`` is checked too. A refusal is raised before anything is made."""
        try:
            image_reference(request.node.image)
        except ValueError as err:
            raise ProviderError(self.name, str(err), code="InvalidImage") from None
        given = request.node.ssh_key.strip()
        if not given:
            return fleet_public_key(self._home, request.fleet)
        problem = check_public_key(given)
        if problem:
            raise ProviderError(self.name, problem, code="InvalidSshKey")
        return given

    def _node_identity(self, request: LaunchRequest) -> tuple[str, str] | None:
        """The identity VMs writing to the request's checkpoint URI carry (looked up once per URI and
        process, also when pools launch in parallel)."""
        uri = request.node.checkpoint_uri
        with self._lock:
            lookup = self._token_locks.setdefault(f"identity|{uri}", threading.Lock())
        with lookup:
            if uri not in self._identities:
                self._identities[uri] = AccountStorage(self.arm, self.resource_group, self.settings).node_identity(uri)
            return self._identities[uri]

    def _cleanup(self, name: str) -> None:
        """Delete what a failed creation of VM ``name`` left: the VM (Failed state) and its NIC."""
        rg, arm = self.resource_group, self.arm
        try:
            arm.call(lambda: arm.compute.virtual_machines.begin_delete(rg, name).result(), f"clean up VM {name}")
            arm.call(
                lambda: arm.network.network_interfaces.begin_delete(rg, nic_name(name)).result(),
                f"clean up NIC of {name}",
            )
        except ProviderError as err:  # reported, not raised: the launch's own error matters more
            log.warning("azure: could not clean up after a failed creation of %s: %s", name, err)

    def _delete_vm(self, name: str) -> str | None:
        """Delete VM ``name`` and its tagged NICs; its fleet, or None when nothing was ours to delete."""
        rg, arm = self.resource_group, self.arm
        try:
            vm = wire(arm.call(lambda: arm.compute.virtual_machines.get(rg, name), f"find VM {name}"))
        except InstanceNotFoundError:
            return None
        fleet = self._tags(vm).get(TAG_FLEET)
        if not fleet:
            log.warning("azure: not deleting VM %s: it carries no spotfleet fleet tag", name)
            return None
        try:
            arm.call(lambda: arm.compute.virtual_machines.begin_delete(rg, name).result(), f"delete VM {name}")
        except InstanceNotFoundError:
            pass
        for ref in ((vm.get("properties") or {}).get("networkProfile") or {}).get("networkInterfaces") or []:
            nic = ref["id"].rsplit("/", 1)[-1]
            try:
                found = wire(arm.call(lambda: arm.network.network_interfaces.get(rg, nic), f"find NIC {nic}"))
                if (found.get("tags") or {}).get(TAG_FLEET) == fleet:
                    arm.call(lambda: arm.network.network_interfaces.begin_delete(rg, nic).result(), f"delete NIC {nic}")
            except InstanceNotFoundError:
                pass
        return fleet

    def _vms(self) -> list[dict[str, Any]]:
        rg, arm = self.resource_group, self.arm
        try:
            return arm.listing(
                lambda **hooks: arm.compute.virtual_machines.list(rg, expand="instanceView", **hooks),
                f"list VMs in {rg}",
            )
        except InstanceNotFoundError:  # no resource group yet: no VMs
            return []

    def _tags(self, vm: Mapping[str, Any]) -> dict[str, str]:
        """The tags that say whose ``vm`` is (its own; a subclass may add those of its owner)."""
        return dict(vm.get("tags") or {})

    def _token_vms(self, token: str) -> dict[str, dict[str, Any]]:
        return {vm["name"]: vm for vm in self._vms() if (vm.get("tags") or {}).get(TAG_TOKEN) == token}

    def _instance(self, vm: Mapping[str, Any]) -> Instance | None:
        return to_instance(vm, self.now(), _prices())

    def _token_lock(self, token: str) -> threading.Lock:
        with self._lock:
            return self._token_locks.setdefault(token, threading.Lock())


_PRICES: dict[str, tuple[str, int, float]] = {}


def _prices() -> dict[str, tuple[str, int, float]]:
    """Pool id (zone-free) -> (accelerator, GPUs, snapshot price), for listing VMs as instances."""
    if not _PRICES:
        for o in snapshot_offers():
            if o.pool.provider == "azure":
                _PRICES[o.pool.id] = (o.accelerator, o.gpus, o.price_per_hour)
    return _PRICES


def from_spec(spec: FleetSpec, settings: AzureSettings) -> AzureProvider:
    """The adapter factory the registration record names: ``launch_mode: scale-set`` gives one
    scale set per region (``providers.azure.scaleset_provider``), else single Spot VMs."""
    if settings.launch_mode == "scale-set":
        from providers.azure.scaleset_provider import AzureScaleSetProvider

        return AzureScaleSetProvider(settings)
    return AzureProvider(settings)
