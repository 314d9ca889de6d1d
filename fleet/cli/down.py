"""``fleet down NAME``: terminate everything the fleet created (found by tag); idempotent. The
face of ``fleet.operations.down``: it confirms, prints what was done and exits non-zero when
something is left.

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

import click

from fleet.cli.app import App, json_option, pass_app
from fleet.cli.complete import fleet_names
from fleet.cli.lifecycle import confirm, money
from fleet.errors import FleetError
from fleet.operations.down import open_down, prepare_down, run_cost


@click.command("down")
@click.argument("name", shell_complete=fleet_names)
@click.option("--yes", "-y", is_flag=True, help="Terminate without asking for confirmation.")
@json_option
@pass_app
def command(app: App, name: str, yes: bool, as_json: bool) -> None:
    """Terminate every instance of fleet NAME (only instances tagged with it)."""
    down = open_down(name, app)
    damaged = down.damaged
    if damaged:
        app.warn(f"{damaged[0]}; taking fleet {name} down from the providers' tags alone")
    shown = len(damaged)
    with prepare_down(down) as pending:
        obs, targets = pending.obs, pending.targets
        if targets:
            confirm(f"Terminate {len(targets)} instance(s) of fleet {name!r}?", yes=yes, as_json=as_json)
        report = pending.apply()
    done, left = report.done, report.left
    cost = run_cost(down, report)
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
    if not report.fully_down:
        problems = [f"{len(left.instances)} instance(s) still running"] if left.instances else []
        problems += [f"{len(left.stopped)} stopped instance(s) still billing storage"] if left.stopped else []
        problems += [e if e.startswith(p) else f"{p}: {e}" for p, e in left.errors.items()]  # errors name theirs
        raise FleetError(f"fleet {name} is not fully down ({'; '.join(problems)}); run `fleet down {name}` again")
    if damaged:
        why = f" ({damaged[-1]})" if len(damaged) > shown else ""
        app.warn(f"the record of fleet {name} was not updated{why}; run `fleet repair {name}` to rebuild it")
