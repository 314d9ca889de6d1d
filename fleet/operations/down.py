"""``fleet down NAME``: terminate everything the fleet created (found by tag); idempotent.

Once a provider lists none of the fleet's instances, its optional ``teardown`` removes what else
the fleet made there (Azure: the VNet and NSG per region); once none is left anywhere, the
scoped checkpoint credentials of identity-less nodes (Vast) are revoked.

A provider that cannot be read (an error, or an answer that does not parse) is never read as "no
instances": `down` terminates what the others list, reports it (``DownReport.left.errors``), and
leaves the fleet recorded as up.

A damaged record (an unreadable row, or an unreadable store file) never keeps a fleet up, nor
does a store that cannot be written (a read-only or full disk): `down` then finds the instances
by tag and terminates them; ``damaged`` says why the record was not updated (``fleet repair``
rebuilds it). A missing store stays an error (nothing says which cloud).

In three steps, so the face can confirm in between: ``open_down`` (the store, the record, the
providers), ``prepare_down`` (a context holding the fleet's lock where the store can be written:
observes and reconciles; ``DownPlan.targets`` is what would be terminated) and
``DownPlan.apply()``; ``run_cost`` then reads what the current run cost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from fleet.errors import ProviderError
from fleet.model import Instance
from fleet.operations.workspace import Workspace, local_providers, providers_of, readable_store, spec_of
from fleet.provisioning import node_credentials
from fleet.provisioning.accounting import CostSummary, summarize
from fleet.provisioning.executor import terminate
from fleet.provisioning.reconcile import Observation, observe, on_demand_prices, sync
from fleet.state import CorruptStoreError, FleetRecord, FleetStatus, LaunchStatus, StateStore, UnwritableStoreError
from fleet.state.runs import current_run, instances_of
from providers.base import Provider, TearsDown

T = TypeVar("T")


@dataclass
class Down:
    """What ``fleet down NAME`` works from: the store (``None`` when its file is unreadable), the
    fleet's record (``None`` without one), its providers, and why the record cannot be updated
    (``damaged``: grows as steps fail; empty when all is well)."""

    name: str
    store: StateStore | None
    record: FleetRecord | None
    providers: dict[str, Provider]
    damaged: list[str] = field(default_factory=list)

    def quiet(self, step: Callable[[], T]) -> T | None:
        """Run a record step; a damaged row or a store that cannot be written is noted in ``damaged``
        instead of stopping `down`."""
        try:
            return step()
        except (CorruptStoreError, UnwritableStoreError) as err:
            self.damaged.append(str(err))
            return None

    @property
    def recordable(self) -> bool:
        """Whether the record can be read and written (no damage noted so far)."""
        return self.store is not None and not self.damaged


@dataclass
class DownReport:
    """What ``DownPlan.apply`` did: ids terminated, and what is ``left`` (instances, stopped
    instances, and per provider why it could not be read, terminated or torn down)."""

    done: list[str]
    left: Observation

    @property
    def fully_down(self) -> bool:
        return not self.left.instances and not self.left.stopped and not self.left.errors


def open_down(name: str, where: Workspace) -> Down:
    """The store (read-only, with why, when it cannot be written; ``None``, with why, when its file
    is unreadable), the fleet's record and its providers (every local-cloud provider without a record)."""
    try:
        store, unwritable = readable_store(where)
        damaged = [unwritable] if unwritable else []
    except CorruptStoreError as err:
        store, damaged = None, [str(err)]
    down = Down(name=name, store=store, record=None, providers={}, damaged=damaged)
    down.record = down.quiet(lambda: store.get_fleet(name)) if store is not None else None
    down.providers = providers_of(where, down.record) if down.record is not None else local_providers(where)
    return down


@dataclass
class DownPlan:
    """The fleet as observed under its lock: ``targets`` are what ``apply`` terminates (stopped
    instances too: they still bill storage); ``writer`` is the store terminations are recorded in
    (``None`` when it cannot be written)."""

    down: Down
    writer: StateStore | None
    obs: Observation

    @property
    def targets(self) -> list[Instance]:
        return self.obs.instances + self.obs.stopped

    def apply(self) -> DownReport:
        down, name, providers, writer = self.down, self.down.name, self.down.providers, self.writer
        done: list[str] = []
        refused: dict[str, str] = {}
        targets = self.targets
        for provider in sorted({i.pool.provider for i in targets}):
            mine = [i for i in targets if i.pool.provider == provider]
            try:
                done += terminate(name, providers[provider], mine, writer, reason="down")
            except ProviderError as err:
                refused[provider] = str(err)
        left = observe(providers, name)
        teardown(providers, name, left)
        store = down.store
        if store is not None and not down.damaged:
            down.quiet(lambda: close_launches(store, name))
            down.quiet(lambda: sync(store, left))
        left.errors.update(refused)
        report = DownReport(done=done, left=left)
        if down.record is not None and report.fully_down:
            revoke_node_credentials(down.record, providers, left)
        if writer is not None and report.fully_down:
            down.quiet(lambda: writer.set_status(name, FleetStatus.DOWN))
        return report


@contextlib.contextmanager
def prepare_down(down: Down) -> Iterator[DownPlan]:
    """Hold the fleet's lock (where the store can be written), observe the providers, reconcile the
    record, and yield what would be terminated."""
    with _locked(down) as writer:
        obs = observe(down.providers, down.name)
        store = down.store
        if store is not None and not down.damaged:
            down.quiet(
                lambda: sync(store, obs, prices=on_demand_prices([store.latest_plan(down.name, applied_only=True)]))
            )
        yield DownPlan(down=down, writer=writer, obs=obs)


def run_cost(down: Down, report: DownReport) -> CostSummary | None:
    """What the fleet's current run cost so far; ``None`` when the record cannot be read."""
    store = down.store
    if store is None or down.damaged:
        return None

    def cost() -> CostSummary:
        run = current_run(store, down.name)
        events = store.events(down.name) if run.after_event else ()
        return summarize(instances_of(run, store.instances(down.name), events), report.left.clock)

    return down.quiet(cost)


@contextlib.contextmanager
def _locked(down: Down) -> Iterator[StateStore | None]:
    """Hold the fleet's lock and yield the store to record terminations in; ``None`` (noted in
    ``damaged``) when there is no store or it cannot be written: `down` goes ahead unlocked then,
    as nothing else can record a launch in that store either."""
    store = down.store
    if store is None or store.read_only:
        yield None
        return
    try:
        lock = store.lock(down.name, "down")
        lock.__enter__()
    except UnwritableStoreError as err:
        down.damaged.append(str(err))
        yield None
        return
    try:
        yield store
    finally:
        down.quiet(lambda: lock.__exit__(None, None, None))


def teardown(providers: Mapping[str, Provider], fleet: str, left: Observation) -> None:
    """Each provider's optional ``teardown`` (``providers.base``), once it lists none of the fleet's
    instances; a refusal is recorded in ``left.errors``, so `down` says to run it again."""
    busy = {i.pool.provider for i in left.instances + left.stopped}
    for name, provider in sorted(providers.items()):
        if not isinstance(provider, TearsDown) or name in busy or name in left.errors:
            continue
        try:
            provider.teardown(fleet)
        except ProviderError as err:
            left.errors[name] = f"removing what fleet {fleet} left besides instances: {err}"


def revoke_node_credentials(record: FleetRecord, providers: Mapping[str, Provider], left: Observation) -> None:
    """Once nothing of the fleet is left, delete the scoped store credentials its identity-less
    nodes had (``fleet.provisioning.node_credentials``); a refusal is recorded in ``left.errors``."""
    spec = spec_of(record)
    if spec is None:
        return
    try:
        node_credentials.revoke(spec, providers)
    except ProviderError as err:
        left.errors[err.provider] = f"revoking the nodes' scoped checkpoint credentials: {err}"


def close_launches(store: StateStore, name: str) -> None:
    """Mark the fleet's launch calls still recorded as requested abandoned (the fleet is taken down)."""
    for launch in store.launches(name, status=LaunchStatus.REQUESTED):
        store.finish_launch(launch.id, status=LaunchStatus.ABANDONED, launched=0, error_message="fleet taken down")
