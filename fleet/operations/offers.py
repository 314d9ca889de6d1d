"""``offers_for(spec)``: the offers the planner sees for a spec, and where they came from.

One answer for `fleet plan`, `up`, `offers`, `rebalance` and `export pulumi`: the live offers of
the spec's providers (each adapter caches and falls back on its own), the snapshot shipped with
the package where no adapter can be set up, CPU types for a head; then, from the state store
when there is one, the interruption rates this fleet learned (``with_learned_rates``) and the
pools blocked after capacity or quota errors (``blocked_pools``). Reading never creates a store.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, TypeVar

from fleet.catalog import CPU, Catalog, CatalogInfo, cpu_offers, filter_for_spec
from fleet.errors import FleetError
from fleet.model import Offer
from fleet.spec import Backend, FleetSpec
from providers.base import OfferQuery, Provider

if TYPE_CHECKING:
    from fleet.operations.workspace import Workspace
    from fleet.state import StateStore

T = TypeVar("T")


def offers_for(
    spec: FleetSpec,
    where: Workspace,
    providers: Mapping[str, Provider] | None = None,
    *,
    snapshot_for: Collection[str] = (),
) -> tuple[list[Offer], CatalogInfo]:
    """The offers the planner sees for ``spec``, and where they came from.

    ``backend: local`` asks the embedded local cloud (live simulated capacity);
    ``backend: cloud`` asks the registered provider adapters and, where there are none
    yet, uses the snapshot shipped with the package. Pass ``providers`` when the caller
    already holds them, so the clouds are opened once, and ``snapshot_for`` to price
    providers that cannot launch here (``cannot_launch``) from the snapshot beside them.
    """
    from providers.registry import providers_for

    try:
        catalog = Catalog(providers=dict(providers) if providers is not None else providers_for(spec, where.home))
    except FleetError:
        if spec.backend is Backend.LOCAL:
            raise
        catalog = Catalog()  # no live adapters in this version: plan from the snapshot
    query = OfferQuery(accelerators=tuple(spec.capacity.accelerators))
    offers, info = catalog.offers(query)
    if catalog.providers and snapshot_for:
        offers += Catalog().offers(query, only=snapshot_for)[0]
    offers = filter_for_spec(offers, spec)
    if spec.head is not None:  # CPU types for the head; live adapters may not list them
        cpu = [o for o in catalog.offers(OfferQuery(accelerators=(CPU,), spot=False))[0] if o.accelerator == CPU]
        listed = {o.pool.provider for o in cpu}
        offers += cpu + [
            o
            for o in cpu_offers()
            if o.pool.provider not in listed
            and spec.backend is not Backend.LOCAL
            and spec.provider_settings(o.pool.provider)
        ]
    return offers, info


def _from_store(where: Workspace, providers: Mapping[str, Provider], read: Callable[[StateStore], T], empty: T) -> T:
    """``read(store)`` on the state store when one exists, without creating one; ``empty``
    when there is none (or no provider to relate it to) or its record cannot be read."""
    if not providers:  # the state store's modules are imported only when there is one to read
        return empty
    from fleet.operations.workspace import store_exists, store_of

    if not store_exists(where):
        return empty
    try:
        store = store_of(where)
    except FleetError:  # an unreadable record: `fleet up` and `repair` say why
        return empty
    try:
        return read(store)
    finally:
        store.close()


def blocked_pools(where: Workspace, providers: Mapping[str, Provider]) -> list[str]:
    """Pools blocked in the state store (capacity or quota errors), without creating a store."""

    def read(store: StateStore) -> list[str]:
        from fleet.provisioning.executor import active_blocks

        return active_blocks(store, providers)

    return _from_store(where, providers, read, [])


def with_learned_rates(
    spec: FleetSpec, offers: list[Offer], providers: Mapping[str, Provider], store: StateStore
) -> list[Offer]:
    """``offers`` with each spot pool's interruption rate updated from what this fleet saw
    there (the rebalancer's Gamma-Poisson update, ``fleet.rebalance.learning``), so `plan`,
    `up` and `rebalance` weigh pools alike. A fleet with no history keeps the catalog's rates."""
    from fleet.rebalance.inputs import fleet_exposure
    from fleet.rebalance.learning import learned_offers

    now = max((p.now() for p in providers.values()), default=0.0)
    return learned_offers(offers, fleet_exposure(store, spec.name, now), spec.rebalance.prior_hours)


def learned_rates(
    where: Workspace, spec: FleetSpec, offers: list[Offer], providers: Mapping[str, Provider]
) -> list[Offer]:
    """:func:`with_learned_rates` from the state store when there is one, without creating it."""
    return _from_store(where, providers, lambda store: with_learned_rates(spec, offers, providers, store), offers)


def running_now(providers: Mapping[str, Provider], fleet: str) -> dict[str, int]:
    """Instances per pool the providers run for ``fleet`` now (by tag); empty when none runs."""
    if not providers:
        return {}
    from fleet.provisioning.reconcile import observe

    return observe(providers, fleet).counts()


def providers_or_none(spec: FleetSpec, where: Workspace) -> dict[str, Provider]:
    """The spec's provider adapters that can launch here; none (plan from the snapshot) where one
    cannot be set up."""
    from providers.registry import providers_for

    try:
        return dict(providers_for(spec, where.home, launchable_only=True))
    except FleetError:
        if spec.backend is Backend.LOCAL:
            raise
        return {}
