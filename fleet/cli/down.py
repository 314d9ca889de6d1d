"""``fleet down NAME``: terminate everything the fleet created (found by tag); idempotent.

Once a provider lists none of the fleet's instances, its optional ``teardown`` removes what else
the fleet made there (Azure: the VNet and NSG per region); once none is left anywhere, the
scoped checkpoint credentials of identity-less nodes (Vast) are revoked.

A provider that cannot be read (an error, or an answer that does not parse) is never read as "no
instances": `down` terminates what the others list, exits non-zero naming it, and leaves the
fleet recorded as up.

A damaged record (an unreadable row, or an unreadable store file) never keeps a fleet up, nor
does a store that cannot be written (a read-only or full disk): `down` then finds the instances
by tag, terminates them, says the record was not updated and points to ``fleet repair``; it exits
non-zero only when something is left. A missing store stays an error (nothing says which cloud)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

import click

from fleet.cli.app import App, json_option, pass_app
from fleet.cli.complete import fleet_names
from fleet.cli.lifecycle import confirm, local_providers, money, providers_of, readable_store, spec_of
from fleet.cli.runs import current_run, instances_of
from fleet.errors import FleetError, ProviderError
from fleet.provisioning import node_credentials
from fleet.provisioning.accounting import summarize
from fleet.provisioning.executor import terminate
from fleet.provisioning.reconcile import Observation, observe, on_demand_prices, sync
from fleet.state import CorruptStoreError, FleetRecord, FleetStatus, LaunchStatus, StateStore, UnwritableStoreError
from providers.base import Provider, TearsDown

T = TypeVar("T")


@click.command("down")
@click.argument("name", shell_complete=fleet_names)
@click.option("--yes", "-y", is_flag=True, help="Terminate without asking for confirmation.")
@json_option
@pass_app
def command(app: App, name: str, yes: bool, as_json: bool) -> None:
    """Terminate every instance of fleet NAME (only instances tagged with it)."""
    store, damaged = _store(app)
    record = _quiet(damaged, lambda: store.get_fleet(name)) if store is not None else None
    providers = providers_of(app, record) if record is not None else local_providers(app)
    if damaged:
        app.warn(f"{damaged[0]}; taking fleet {name} down from the providers' tags alone")
    shown = len(damaged)
    with _locked(store, name, damaged) as writer:
        obs = observe(providers, name)
        if store is not None and not damaged:
            _quiet(
                damaged, lambda: sync(store, obs, prices=on_demand_prices([store.latest_plan(name, applied_only=True)]))
            )
        targets = obs.instances + obs.stopped  # stopped ones (Vast outbid) still bill storage
        if targets:
            confirm(f"Terminate {len(targets)} instance(s) of fleet {name!r}?", yes=yes, as_json=as_json)
        done: list[str] = []
        refused: dict[str, str] = {}
        for provider in sorted({i.pool.provider for i in targets}):
            mine = [i for i in targets if i.pool.provider == provider]
            try:
                done += terminate(name, providers[provider], mine, writer, reason="down")
            except ProviderError as err:
                refused[provider] = str(err)
        left = observe(providers, name)
        _teardown(providers, name, left)
        if store is not None and not damaged:
            _quiet(damaged, lambda: _close_launches(store, name))
            _quiet(damaged, lambda: sync(store, left))
        left.errors.update(refused)
        if record is not None and not left.instances and not left.stopped and not left.errors:
            _revoke_node_credentials(record, providers, left)
        if writer is not None and not left.instances and not left.stopped and not left.errors:
            _quiet(damaged, lambda: writer.set_status(name, FleetStatus.DOWN))
    cost = None
    if store is not None and not damaged:

        def _run_cost():
            run = current_run(store, name)
            return summarize(
                instances_of(run, store.instances(name), store.events(name) if run.after_event else ()), left.clock
            )

        cost = _quiet(damaged, _run_cost)
    if as_json:
        app.emit_json(
            {
                "fleet": name,
                "terminated": done,
                "remaining": [i.id for i in left.instances + left.stopped],
                "provider_errors": left.errors,
                "cost": cost.to_dict() if cost else None,
                "record_damaged": damaged[0] if damaged else None,
            }
        )
    elif not targets and not obs.errors:
        app.console.print(
            f"fleet {name} has no running instances; nothing to terminate"
            + (f" (cost so far {money(cost.cost_so_far)})" if cost else "")
        )
    elif not targets:
        app.console.print(
            f"fleet {name}: no instances found on the providers that answered; "
            f"could not read {', '.join(sorted(obs.errors))}"
        )
    else:
        app.console.print(
            f"terminated {len(done)} instance(s) of fleet {name}"
            + (f"; cost so far {money(cost.cost_so_far)}" if cost else "")
        )
    if left.instances or left.stopped or left.errors:
        problems = [f"{len(left.instances)} instance(s) still running"] if left.instances else []
        problems += [f"{len(left.stopped)} stopped instance(s) still billing storage"] if left.stopped else []
        problems += [e if e.startswith(p) else f"{p}: {e}" for p, e in left.errors.items()]  # errors name theirs
        raise FleetError(f"fleet {name} is not fully down ({'; '.join(problems)}); run `fleet down {name}` again")
    if damaged:
        why = f" ({damaged[-1]})" if len(damaged) > shown else ""
        app.warn(f"the record of fleet {name} was not updated{why}; run `fleet repair {name}` to rebuild it")


def _store(app: App) -> tuple[StateStore | None, list[str]]:
    """The store, or ``None`` (with why) when the file is unreadable: `down` then works from tags
    alone; a store that cannot be written is opened read-only (with why), to find the providers."""
    try:
        store, unwritable = readable_store(app)
    except CorruptStoreError as err:
        return None, [str(err)]
    return store, [unwritable] if unwritable else []


def _quiet(damaged: list[str], step: Callable[[], T]) -> T | None:
    """Run a record step; a damaged row or a store that cannot be written is noted in ``damaged``
    instead of stopping `down`."""
    try:
        return step()
    except (CorruptStoreError, UnwritableStoreError) as err:
        damaged.append(str(err))
        return None


@contextlib.contextmanager
def _locked(store: StateStore | None, name: str, damaged: list[str]) -> Iterator[StateStore | None]:
    """Hold the fleet's lock and yield the store to record terminations in; ``None`` (noted in
    ``damaged``) when there is no store or it cannot be written: `down` goes ahead unlocked then,
    as nothing else can record a launch in that store either."""
    if store is None or store.read_only:
        yield None
        return
    try:
        lock = store.lock(name, "down")
        lock.__enter__()
    except UnwritableStoreError as err:
        damaged.append(str(err))
        yield None
        return
    try:
        yield store
    finally:
        _quiet(damaged, lambda: lock.__exit__(None, None, None))


def _teardown(providers: Mapping[str, Provider], fleet: str, left: Observation) -> None:
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


def _revoke_node_credentials(record: FleetRecord, providers: Mapping[str, Provider], left: Observation) -> None:
    """Once nothing of the fleet is left, delete the scoped store credentials its identity-less
    nodes had (``fleet.provisioning.node_credentials``); a refusal is recorded in ``left.errors``."""
    spec = spec_of(record)
    if spec is None:
        return
    try:
        node_credentials.revoke(spec, providers)
    except ProviderError as err:
        left.errors[err.provider] = f"revoking the nodes' scoped checkpoint credentials: {err}"


def _close_launches(store: StateStore, name: str) -> None:
    for launch in store.launches(name, status=LaunchStatus.REQUESTED):
        store.finish_launch(launch.id, status=LaunchStatus.ABANDONED, launched=0, error_message="fleet taken down")
