"""``fleet plan SPEC``: the cheapest diversified fleet for a spec, its true cost and savings
(made by ``fleet.operations.plan``; drawn by ``fleet.cli.render``).

Exit status: 0 when the plan meets the spec, 3 when it cannot (the best partial plan is
still printed, with the limit that binds), 2 for a bad spec, 1 for other errors.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import click

from fleet.cli.app import App, json_option, pass_app
from fleet.cli.lifecycle import EXIT_INFEASIBLE
from fleet.cli.render import show
from fleet.cli.tables import wide_option
from fleet.operations.plan import changes, plan_fleet
from fleet.spec import Strategy, load_spec


@click.command("plan")
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option(
    "--strategy", type=click.Choice([s.value for s in Strategy]), help="Override the spec's allocation strategy."
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also save the plan, with its spec, as JSON here (`fleet up FILE` applies it as it is; "
    "also for review and Pulumi).",
)
@wide_option
@json_option
@pass_app
def command(app: App, spec_path: str, strategy: str | None, out: Path | None, wide: bool, as_json: bool) -> None:
    """Plan the fleet in SPEC: pools, counts, expected true cost and savings. Launches nothing.

    When that fleet already runs, the plan is shown as a change against what runs
    (keep / launch / terminate per pool), as `fleet up` would apply it.
    """
    spec = load_spec(spec_path)
    file_hash = spec.spec_hash()  # what `fleet up FILE` compares the spec file with
    if strategy:
        spec = spec.model_copy(update={"strategy": Strategy(strategy)})
    with app.err.status("gathering offers and planning...") if not as_json else nullcontext():
        made = plan_fleet(spec, app)
    result, saved, current = made.plan, made.saved, made.current
    if out is not None:
        from fleet.operations.saved_plan import write

        write(out, saved, spec, spec_path, file_hash)
    if as_json:
        if current:
            data = json.loads(saved.to_json())
            data["running_now"] = current
            data["changes"] = changes(saved, current)
            app.emit_json(data)
        else:
            click.echo(saved.to_json())
    else:
        show(app, result, made.info, current=current or None, wide=wide)
        from rich.markup import escape

        for line in made.marks:
            app.console.print(f"[yellow]{escape(line)}[/]")
        if out is not None:
            app.console.print(f"[dim]plan saved to {out}[/]")
    if not result.feasible:
        raise SystemExit(EXIT_INFEASIBLE)
