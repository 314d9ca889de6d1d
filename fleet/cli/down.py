"""``fleet down NAME``: terminate everything the fleet created (found by tag); idempotent."""

from __future__ import annotations

import click

from fleet.provisioning.accounting import summarize
from fleet.cli.app import App, json_option, pass_app
from fleet.cli.lifecycle import confirm, money, providers_of, store_of
from fleet.cli.runs import current_run, instances_of
from fleet.errors import FleetError, ProviderError
from fleet.provisioning.executor import terminate
from fleet.provisioning.reconcile import observe, on_demand_prices, sync
from fleet.state import FleetStatus, LaunchStatus


@click.command("down")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Terminate without asking for confirmation.")
@json_option
@pass_app
def command(app: App, name: str, yes: bool, as_json: bool) -> None:
    """Terminate every instance of fleet NAME (only instances tagged with it)."""
    store = store_of(app)
    record = store.get_fleet(name)
    providers = providers_of(app, record)
    with store.lock(name, "down"):
        obs = observe(providers, name)
        sync(store, obs, prices=on_demand_prices([store.latest_plan(name, applied_only=True)]))
        targets = obs.instances
        if targets:
            confirm(f"Terminate {len(targets)} instance(s) of fleet {name!r}?", yes=yes, as_json=as_json)
        done: list[str] = []
        refused: dict[str, str] = {}
        for provider in sorted({i.pool.provider for i in targets}):
            mine = [i for i in targets if i.pool.provider == provider]
            try:
                done += terminate(name, providers[provider], mine, store, reason="down")
            except ProviderError as err:
                refused[provider] = str(err)
        for launch in store.launches(name, status=LaunchStatus.REQUESTED):
            store.finish_launch(launch.id, status=LaunchStatus.ABANDONED, launched=0,
                                error_message="fleet taken down")
        left = observe(providers, name)
        sync(store, left)
        left.errors.update(refused)
        if not left.instances and not left.errors:
            store.set_status(name, FleetStatus.DOWN)
    run = current_run(store, name)
    cost = summarize(instances_of(run, store.instances(name), store.events(name) if run.after_event else ()),
                     left.clock)
    if as_json:
        app.emit_json({"fleet": name, "terminated": done, "remaining": [i.id for i in left.instances],
                       "provider_errors": left.errors, "cost": cost.to_dict()})
    elif not targets:
        app.console.print(f"fleet {name} has no running instances; nothing to terminate "
                          f"(cost so far {money(cost.cost_so_far)})")
    else:
        app.console.print(f"terminated {len(done)} instance(s) of fleet {name}; cost so far {money(cost.cost_so_far)}")
    if left.instances or left.errors:
        problems = [f"{len(left.instances)} instance(s) still running"] if left.instances else []
        problems += [f"{p}: {e}" for p, e in left.errors.items()]
        raise FleetError(f"fleet {name} is not fully down ({'; '.join(problems)}); run `fleet down {name}` again")
