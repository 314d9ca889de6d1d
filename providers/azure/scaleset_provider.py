"""``AzureScaleSetProvider``: the Azure adapter in ``launch_mode: scale-set``.

The launch requests of one fleet in one region become one Flexible scale set
(``providers.azure.scaleset``). The executor hands a provider that has ``launch_group`` all of a
round's requests at once (``providers.base.OPTIONAL_METHODS``); ``launch`` is a group of one.

Per region (regions in parallel): the fleet's VNet is ensured, then the set is grown once per
request, on-demand requests first, then the larger ones: capacity = the set's VMs now + what the
request still needs, ``baseRegularPriorityCount`` = its Regular VMs now + the request's count
when the request is on-demand, ``skuProfile`` = the region's sizes with the request's first. The
VMs the set made are listed (one listing per step) and reported by the pool their size and
priority give; a VM a step made in a fallback size counts for a later request of that pool in
the same group, or else is reported with the request that made it. Fewer VMs than asked is a
capacity shortfall (``error_kind="capacity"``, the ARM code of the failed operation).

Idempotency: a token seen in this process returns what it returned before (VMs gone since are
``terminated``); a token the set's ledger already holds (an earlier process grew the set for it)
does not grow it again and returns the set's VMs of its pool. Requests tagged with a role other
than ``worker`` (a head node) are launched as individual VMs (``AzureProvider.launch``).

Listing: a VM whose ``virtualMachineScaleSet`` is a set carrying a spotfleet fleet tag is listed
with that set's fleet tags and the pool its size and priority give, whatever tags Azure put on the
VM itself (whether a Flexible set copies its tags is not documented); a set without the tag, and
its VMs, are never touched (a VM of such a set is judged by its own tags alone).
``terminate`` deletes single VMs (Flexible allows it; the set's capacity drops by one and nothing
else changes), then deletes the terminated fleets' sets that are left empty.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fleet.errors import InstanceNotFoundError, NoCapacityError, ProviderError, error_kind
from fleet.model import TAG_FLEET, TAG_ROLE, WORKER, Instance, InstanceState, LaunchRequest, LaunchResult, Market
from providers.azure.arm import wire
from providers.azure.provider import AzureProvider
from providers.azure.scaleset import (
    ledger,
    member_tags,
    pool_of,
    regional,
    set_body,
    set_name,
    set_ref,
    token_mark,
)
from providers.base import OfferQuery

log = logging.getLogger(__name__)
_Failure = tuple[str, str, str]


class AzureScaleSetProvider(AzureProvider):
    """The Azure adapter with one Flexible Spot-priority-mix scale set per fleet and region."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._groups: dict[str, tuple[LaunchRequest, LaunchResult]] = {}
        self._touched: set[str] = set()
        self._owners: dict[str, dict[str, str]] = {}  # set id (lower) -> its tags, for sets with a fleet tag

    # ---- offers and launch ----------------------------------------------------------------
    def list_offers(self, query: OfferQuery) -> list:
        return regional(super().list_offers(query))

    def launch(self, request: LaunchRequest) -> LaunchResult:
        """A group of one; a refusal before anything was made is raised (the ``launch`` contract)."""
        return self.launch_group([request], raise_refusals=True)[0]

    def launch_group(self, requests: Sequence[LaunchRequest], *, raise_refusals: bool = False) -> list[LaunchResult]:
        """One result per request, in order; see the module doc. A region's refusal before anything
        was made there (quota, auth, throttling...) is reported in the results of its requests
        (``error_kind``), or raised with ``raise_refusals``."""
        out: dict[int, LaunchResult] = {}
        regions: dict[tuple[str, str], list[tuple[int, LaunchRequest]]] = {}
        for i, req in enumerate(requests):
            pool = req.offer.pool
            if pool.provider != self.name:
                raise ProviderError(
                    self.name, f"pool {pool.id} belongs to {pool.provider}, not azure", code="wrong-provider"
                )
            seen = self._groups.get(req.token)
            if seen is not None:
                out[i] = self._replay_group(req, seen)
            elif req.tags.get(TAG_ROLE, WORKER) != WORKER:
                out[i] = super().launch(req)
            else:
                regions.setdefault((req.fleet, pool.region), []).append((i, req))
        if regions:
            with ThreadPoolExecutor(max_workers=min(8, len(regions))) as ex:
                run = self._launch_region if raise_refusals else self._region_or_failure
                for done in ex.map(lambda job: run(*job), regions.items()):
                    out.update(done)
        return [out[i] for i in range(len(requests))]

    def _region_or_failure(
        self, key: tuple[str, str], jobs: list[tuple[int, LaunchRequest]]
    ) -> dict[int, LaunchResult]:
        """:meth:`_launch_region`, with an error before any step reported in each request's result."""
        try:
            return self._launch_region(key, jobs)
        except ProviderError as err:
            failed = LaunchResult(instances=(), error_kind=error_kind(err), error_code=err.code, error_message=str(err))
            return {i: failed for i, _ in jobs}

    def _launch_region(self, key: tuple[str, str], jobs: list[tuple[int, LaunchRequest]]) -> dict[int, LaunchResult]:
        fleet, region = key
        with self._token_lock(f"scale-set|{fleet}|{region}"):
            keys = {i: self._login_key(r) for i, r in jobs}
            subnet = self._ensure_network(fleet, region, ssh=any(r.node.ssh_key for _, r in jobs))
            name = set_name(fleet, region)
            vmss = self._get_set(name)
            if vmss is not None and (vmss.get("tags") or {}).get(TAG_FLEET) != fleet:
                raise ProviderError(
                    self.name,
                    f"scale set {name} exists but does not carry this fleet's tag; not touching it",
                    code="foreign-scale-set",
                )
            order = sorted(jobs, key=lambda j: (j[1].offer.pool.market is Market.SPOT, -j[1].count, j[1].offer.pool.id))
            sizes = list(dict.fromkeys(r.offer.pool.instance_type for _, r in order))
            spot = [r for _, r in order if r.offer.pool.market is Market.SPOT]
            max_price = (
                -1.0 if not spot or any(r.max_price is None for r in spot) else max(float(r.max_price) for r in spot)
            )  # type: ignore[arg-type]
            members = self._members(name)
            spare: dict[str, dict[str, Any]] = {}  # made by this group, not yet given to a request
            origin: dict[str, int] = {}
            got: dict[int, list[dict[str, Any]]] = {}
            failures: dict[int, _Failure] = {}
            for i, req in order:
                pool_id = req.offer.pool.id
                if any(f[0] not in ("", "capacity") for f in failures.values()):  # quota, auth...: stop here
                    got[i], failures[i] = [], next(f for f in failures.values() if f[0] != "capacity")
                    continue
                if token_mark(req.token) in ledger(vmss):  # grown for this token before: do not grow again
                    got[i] = [v for v in members.values() if pool_of(v).id == pool_id][: req.count]
                    continue
                got[i] = [spare.pop(n) for n in [n for n, v in spare.items() if pool_of(v).id == pool_id][: req.count]]
                need = req.count - len(got[i])
                if need <= 0:
                    continue
                regular = sum(1 for v in members.values() if pool_of(v).market is Market.ON_DEMAND)
                first = req.offer.pool.instance_type
                body = set_body(
                    req,
                    [first] + [s for s in sizes if s != first],
                    subnet,
                    capacity=len(members) + need,
                    base_regular=regular + (need if req.offer.pool.market is Market.ON_DEMAND else 0),
                    max_price=max_price,
                    marks=ledger(vmss) + [token_mark(req.token)],
                    ssh_key=keys[i],
                    eviction_policy=self.settings.eviction_policy,
                    identity=self._node_identity(req),
                )
                try:
                    vmss = wire(
                        self.arm.call(
                            lambda: self.arm.compute.virtual_machine_scale_sets.begin_create_or_update(
                                self.resource_group, name, body
                            ).result(),
                            f"grow scale set {name}",
                        )
                    )
                except ProviderError as err:
                    if not isinstance(err, NoCapacityError) and not (spare or any(got.values())):
                        raise  # nothing made: refused as ``launch`` refuses
                    failures[i] = (error_kind(err), err.code, str(err))
                    vmss = self._get_set(name)
                now = self._members(name)
                for n, v in now.items():
                    if n not in members:
                        spare[n], origin[n] = v, i
                members = now
                got[i] += [spare.pop(n) for n in [n for n, v in spare.items() if pool_of(v).id == pool_id][:need]]
            for n, v in spare.items():  # fallback sizes no request of the group wanted
                got[origin[n]].append(v)
            out = {}
            for i, req in jobs:
                mine = sum(1 for v in got[i] if pool_of(v).id == req.offer.pool.id)
                kind, code, message = failures.get(i, ("", "", ""))
                if mine < req.count and not kind:
                    kind, code = "capacity", "ScaleSetShortfall"
                    message = f"scale set {name} made {mine} of {req.count} VMs of {req.offer.pool.id}"
                tags = (vmss or {}).get("tags") or {}
                result = LaunchResult(
                    instances=tuple(self._member_instance(v, tags) for v in got[i]),
                    error_kind=kind,
                    error_code=code,
                    error_message=message,
                )
                self._groups[req.token] = (req, result)
                out[i] = result
            return out

    def _replay_group(self, req: LaunchRequest, seen: tuple[LaunchRequest, LaunchResult]) -> LaunchResult:
        old, result = seen
        if (old.fleet, old.offer.pool.id, old.count) != (req.fleet, req.offer.pool.id, req.count):
            raise ProviderError(
                self.name,
                f"launch token {req.token!r} was already used with different parameters",
                code="token-mismatch",
            )
        alive = {vm["name"] for vm in self._vms()}
        now = self.now()
        return result.model_copy(
            update={
                "instances": tuple(
                    i if i.id in alive else i.model_copy(update={"state": InstanceState.TERMINATED, "ended_at": now})
                    for i in result.instances
                )
            }
        )

    # ---- listing and terminating ------------------------------------------------------------
    def _vms(self) -> list[dict[str, Any]]:
        """The resource group's VMs; those whose ``virtualMachineScaleSet`` is a set with a spotfleet
        fleet tag are listed with :func:`member_tags` (the set's tags, the pool from the VM itself),
        whether or not Azure copied the set's tags onto them."""
        vms = super()._vms()
        if not any(set_ref(v) for v in vms):
            return vms
        sets = {str(s["id"]).lower(): s.get("tags") or {} for s in self._sets()}
        with self._lock:
            self._owners.update({k: t for k, t in sets.items() if t.get(TAG_FLEET)})
        out = []
        for vm in vms:
            tags = sets.get(set_ref(vm)) or {}
            if tags.get(TAG_FLEET):
                vm = {**vm, "tags": member_tags(vm, tags)}
            out.append(vm)
        return out

    def _tags(self, vm: Mapping[str, Any]) -> dict[str, str]:
        tags = super()._tags(vm)
        ref = set_ref(vm)
        if not ref:
            return tags
        with self._lock:
            set_tags = self._owners.get(ref)
        if set_tags is None:  # a set's fleet tag never changes: one look per set and process
            set_tags = (self._get_set(ref.rsplit("/", 1)[-1]) or {}).get("tags") or {}
            if set_tags.get(TAG_FLEET):
                with self._lock:
                    self._owners[ref] = set_tags
        return member_tags(vm, set_tags) if set_tags.get(TAG_FLEET) else tags

    def _delete_vm(self, name: str) -> str | None:
        fleet = super()._delete_vm(name)
        if fleet:
            with self._lock:
                self._touched.add(fleet)
        return fleet

    def terminate(self, ids: Sequence[str]) -> None:
        super().terminate(ids)
        with self._lock:
            fleets, self._touched = sorted(self._touched), set()
        if fleets:
            self._delete_empty_sets(fleets)

    def teardown(self, fleet: str) -> list[str]:
        """The fleet's empty scale sets (all their VMs evicted), then its network (``AzureProvider.teardown``)."""
        return self._delete_empty_sets([fleet]) + super().teardown(fleet)

    def _delete_empty_sets(self, fleets: list[str]) -> list[str]:
        """Delete the scale sets of ``fleets`` that hold no VM (never a set without the tag); their names."""
        used = {set_ref(v) for v in super()._vms()}
        deleted: list[str] = []
        for vmss in self._sets():
            fleet = (vmss.get("tags") or {}).get(TAG_FLEET)
            if fleet not in fleets or str(vmss["id"]).lower() in used:
                continue
            name = vmss["name"]
            try:
                self.arm.call(
                    lambda: self.arm.compute.virtual_machine_scale_sets.begin_delete(
                        self.resource_group, name
                    ).result(),
                    f"delete empty scale set {name}",
                )
                deleted.append(name)
            except InstanceNotFoundError:
                pass
        return deleted

    # ---- ARM reads ----------------------------------------------------------------------------
    def _sets(self) -> list[dict[str, Any]]:
        rg, arm = self.resource_group, self.arm
        try:
            return arm.call(
                lambda: [wire(s) for s in arm.compute.virtual_machine_scale_sets.list(rg)], f"list scale sets in {rg}"
            )
        except InstanceNotFoundError:
            return []

    def _get_set(self, name: str) -> dict[str, Any] | None:
        rg, arm = self.resource_group, self.arm
        try:
            return wire(
                arm.call(lambda: arm.compute.virtual_machine_scale_sets.get(rg, name), f"find scale set {name}")
            )
        except InstanceNotFoundError:
            return None

    def _members(self, name: str) -> dict[str, dict[str, Any]]:
        """The live VMs of set ``name`` by VM name (Failed and Deleting ones left out)."""
        suffix = f"/virtualmachinescalesets/{name.lower()}"
        return {
            v["name"]: v
            for v in super()._vms()
            if set_ref(v).endswith(suffix)
            and (v.get("properties") or {}).get("provisioningState") not in ("Failed", "Deleting")
        }

    def _member_instance(self, vm: Mapping[str, Any], set_tags: Mapping[str, str]) -> Instance:
        inst = self._instance({**vm, "tags": member_tags(vm, set_tags)})
        assert inst is not None
        return inst
