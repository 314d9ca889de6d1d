"""``fleet up SPEC|PLAN``: plan a fleet and launch it; a rerun only fills what is missing.

In three steps, so the face can show the plan and confirm in between:

1. ``read_up(path, where)`` reads the spec (or a saved plan and its spec), opens the spec's
   providers and gathers what the planner sees (``fleet.operations.offers``); a saved plan whose
   offers changed is refused here, before anything is launched.
2. ``preview_up(source, where)`` (``--dry-run``: no store is created, nothing changes) or
   ``prepare_up(source, where)``: a context that opens (creates) the store, holds the fleet's
   lock, observes the providers (one that cannot be listed refuses the whole launch: its
   instances would be launched twice) and plans against what runs. It yields an ``UpPlan``.
3. ``UpPlan.apply(progress=...)``, still inside the lock: records a new run when the name was
   down, reconciles the record, saves the fleet, starts the head first when the spec has one and
   applies the plan through the executor (``fleet.provisioning.executor.apply``), re-planning a
   shortfall unless the plan was saved. Returns the executor's ``ApplyReport``.

Progress goes to a sink (``ProgressSink``): any callable taking the executor's ``Progress``
steps; the CLI draws bars with it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from fleet import crashpoints
from fleet.errors import FleetError
from fleet.model import Offer, Plan, Quota
from fleet.operations import saved_plan
from fleet.operations.offers import blocked_pools, learned_rates, offers_for, with_learned_rates
from fleet.operations.plan import changes
from fleet.operations.workspace import Workspace, store_of
from fleet.provisioning import ceiling
from fleet.provisioning.executor import ApplyReport, active_blocks, apply
from fleet.provisioning.launching import Progress
from fleet.provisioning.reconcile import Observation, observe, on_demand_prices, sync
from fleet.safetext import safe
from fleet.secrets import resolve_env
from fleet.spec import FleetSpec, load_spec
from fleet.state import FleetStatus, StateStore
from fleet.state.runs import start_run
from providers.base import Provider, account_quotas


class ProgressSink(Protocol):
    """Where ``fleet up`` says how far it got: one call per executor step (a pool's launch
    started or ended, a pool blocked, a re-plan, a note)."""

    def __call__(self, step: Progress) -> None: ...


@dataclass(frozen=True)
class UpSource:
    """What ``fleet up`` starts from: the spec (a saved plan's, when ``saved``), its providers,
    the offers the planner sees and the account quotas."""

    spec: FleetSpec
    saved: saved_plan.SavedPlan | None
    providers: Mapping[str, Provider]
    offers: list[Offer]
    quotas: list[Quota]


@dataclass(frozen=True)
class UpPreview:
    """``fleet up --dry-run``: the plan, what runs now and the change between them."""

    spec: FleetSpec
    plan: Plan
    current: dict[str, int]

    @property
    def changes(self) -> dict[str, int]:
        return changes(self.plan, self.current)


def read_up(path: str, where: Workspace, *, dry_run: bool = False, environ: Mapping[str, str] = os.environ) -> UpSource:
    """The spec or saved plan at ``path``, its providers, offers and quotas. A ``${env:NAME}`` of
    ``node.env`` that is not set fails here (unless ``dry_run``), before anything is launched."""
    from providers.registry import providers_for

    saved = saved_plan.read(path) if saved_plan.is_saved_plan(path) else None
    spec = saved.spec if saved is not None else load_spec(path)
    if not dry_run:
        resolve_env(spec.node.env, environ)
    providers = providers_for(spec, where.home)
    offers, _info = offers_for(spec, where, providers)
    if saved is not None:
        saved_plan.check_offers(saved, offers)
    return UpSource(spec=spec, saved=saved, providers=providers, offers=offers, quotas=account_quotas(providers))


def preview_up(source: UpSource, where: Workspace) -> UpPreview:
    """The plan ``fleet up`` would apply and what runs now; creates no store, changes nothing."""
    from fleet.planning.planner import plan as make_plan

    spec, providers = source.spec, source.providers
    current = observe(providers, spec.name).counts()
    offers = learned_rates(where, spec, source.offers, providers)
    plan = (
        source.saved.plan
        if source.saved is not None
        else make_plan(spec, offers, current=current, blocked=blocked_pools(where, providers), quotas=source.quotas)
    )
    return UpPreview(spec=spec, plan=plan, current=current)


def refuse_unreadable(name: str, errors: Mapping[str, str]) -> None:
    """Launch nothing while a provider of the fleet cannot be listed: it may run instances of the
    fleet that a plan made without them would launch again elsewhere (as `fleet rebalance` does)."""
    if errors:
        said = "; ".join(f"{p}: could not list instances ({safe(e)})" for p, e in sorted(errors.items()))
        raise FleetError(
            f"{said}; fleet up launched nothing for {name}, because instances there would be "
            "launched twice; rerun when the provider answers, or disable it under `providers:`"
        )


@dataclass
class UpPlan:
    """The plan ``fleet up`` is about to apply, made under the fleet's lock (see ``prepare_up``)."""

    source: UpSource
    store: StateStore
    obs: Observation
    current: dict[str, int]
    offers: list[Offer]
    plan: Plan

    @property
    def spec(self) -> FleetSpec:
        return self.source.spec

    @property
    def changes(self) -> dict[str, int]:
        return changes(self.plan, self.current)

    def check_ceiling(self, max_cost: float | None) -> None:
        """Refuse (``FleetError``) a plan that costs more per hour than ``max_cost`` (default: the
        spec's ``budget.max_per_hour``, else the built-in ceiling); see ``fleet.provisioning.ceiling``."""
        ceiling.check(self.plan, self.spec, max_cost)

    def apply(
        self,
        *,
        progress: ProgressSink | None = None,
        max_workers: int = 32,
        prompted: bool = False,
        environ: Mapping[str, str] = os.environ,
        clock: Callable[[], float] = time.time,
    ) -> ApplyReport:
        """Launch the plan (see the module doc). ``prompted``: the face asked for confirmation, which
        may have taken a while, so the providers are observed again before launching."""
        from fleet.nodelogs import record_bucket
        from fleet.planning.planner import plan as make_plan
        from fleet.provisioning.roles import fleet_node, start_head

        spec, store, providers, obs, current = self.spec, self.store, self.source.providers, self.obs, self.current
        previous = store.find_fleet(spec.name)
        if previous is not None and previous.status == FleetStatus.DOWN:  # the name is reused: a new run
            start_run(store, spec.name, at=max(obs.now.values(), default=clock()))
        sync(store, obs, prices=on_demand_prices([self.plan]))
        store.save_fleet(
            spec.name,
            status=FleetStatus.PLANNED,
            spec_json=spec.model_dump_json(),
            spec_hash=spec.spec_hash(),
            backend=spec.backend.value,
        )
        crashpoints.reached("fleet-saved")

        def replan(now_running: Mapping[str, int], blocked: Collection[str]) -> Plan:
            # capacity hints were read before this run launched: what it launched since is taken
            left = [
                o
                if o.capacity_hint is None
                else o.model_copy(
                    update={
                        "capacity_hint": max(
                            0, o.capacity_hint - max(0, now_running.get(o.pool.id, 0) - current.get(o.pool.id, 0))
                        )
                    }
                )
                for o in self.offers
            ]
            return make_plan(spec, left, current=now_running, blocked=blocked, quotas=account_quotas(providers))

        node = fleet_node(spec, providers, environ)
        record_bucket(store, spec.name, node.checkpoint_uri)  # where `fleet logs` finds node logs
        role_nodes = None
        if spec.head is not None:  # the head first; the workers get its address
            node, role_nodes = start_head(
                spec,
                self.plan,
                providers,
                store,
                node=node,
                current=current,
                head_env=resolve_env(spec.head.env, environ),
                progress=progress,
                max_workers=max_workers,
            )
            obs, prompted = observe(providers, spec.name), True
        report = apply(
            self.plan,
            providers,
            store,
            progress=progress,
            replan=None if self.source.saved is not None else replan,
            node=node,
            max_workers=max_workers,
            observed=None if prompted else obs,  # a prompt may have taken a while
            role_nodes=role_nodes,
        )
        store.set_status(spec.name, FleetStatus.UP if report.ok else FleetStatus.SHORT)
        return report


@contextlib.contextmanager
def prepare_up(source: UpSource, where: Workspace) -> Iterator[UpPlan]:
    """Open (create) the store, hold the fleet's lock while the block runs, and yield the plan made
    against what runs now; a provider that cannot be listed refuses the launch (``FleetError``)."""
    from fleet.planning.planner import plan as make_plan

    spec, providers = source.spec, source.providers
    store = store_of(where, create=True)
    crashpoints.reached("store-opened")
    with store.lock(spec.name, "up"):
        obs = observe(providers, spec.name)
        refuse_unreadable(spec.name, obs.errors)
        current = obs.counts()
        offers = with_learned_rates(spec, source.offers, providers, store)
        plan = (
            source.saved.plan
            if source.saved is not None
            else make_plan(spec, offers, current=current, blocked=active_blocks(store, providers), quotas=source.quotas)
        )
        yield UpPlan(source=source, store=store, obs=obs, current=current, offers=offers, plan=plan)
