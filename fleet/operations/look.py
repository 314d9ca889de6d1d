"""One reconciled look at a recorded fleet: what ``fleet status``, ``fleet history`` and the
dashboard show (``fleet.views`` turns it into data).

``look`` reads the fleet from its providers and reconciles the record with them where the
fleet's lock can be taken (``synced``); another command holding it, or a store that cannot be
written, leaves the record alone and says so (``synced`` False, ``unwritable``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fleet.model import PlanDigest
from fleet.operations.workspace import Workspace, providers_of, try_lock
from fleet.provisioning.reconcile import Observation, SyncResult, observe, sync
from fleet.state import FleetRecord, StateStore, UnwritableStoreError
from providers.base import Provider


@dataclass
class FleetView:
    """One reconciled look at a recorded fleet (``synced`` is False when another command held
    the fleet's lock: the providers were read, the record was left alone)."""

    record: FleetRecord
    providers: dict[str, Provider]
    obs: Observation
    synced: bool
    result: SyncResult | None
    #: The plan that runs (what a look needs of it), None before any plan was made.
    plan: PlanDigest | None
    #: Why the record could not be written (read-only or full disk), "" when it could.
    unwritable: str = ""
    #: The local clock, read once when the view was taken: every figure of one output uses it.
    read_at: float = field(default_factory=time.time)

    def clock(self, provider: str) -> float:
        """``provider``'s clock as it was read (the local clock when no provider answered)."""
        return self.obs.clock(provider) if self.obs.now else self.read_at


def look(where: Workspace, store: StateStore, name: str, command: str) -> FleetView:
    """Read ``name`` from the providers and reconcile the store with it where the lock allows."""
    record = store.get_fleet(name)
    providers = providers_of(where, record)
    # an `up` stopped before it finished leaves its plan unmarked: that plan is still what runs
    plan = store.latest_plan_digest(name, applied_only=True) or store.latest_plan_digest(name)
    unwritable: list[str] = []
    with try_lock(store, name, command, unwritable) as held:
        obs = observe(providers, name)
        try:
            result = sync(store, obs, prices=dict(plan.on_demand) if plan else {}) if held else None
        except UnwritableStoreError as err:  # the disk filled up after the lock was taken
            held, result = False, None
            unwritable.append(str(err))
    return FleetView(
        record=store.get_fleet(name),
        providers=providers,
        obs=obs,
        synced=held,
        result=result,
        plan=plan,
        unwritable=unwritable[0] if unwritable else "",
    )
