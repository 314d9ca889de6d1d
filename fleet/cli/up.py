"""``fleet up SPEC``: plan, show, confirm, launch with progress, summarise. Rerunning converges.

Exit status: 0 when the fleet holds its plan, 3 when it ends short (what is missing and
why is printed), 1 for other errors, 2 for a bad spec.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import click

from fleet.cli.app import App, json_option, pass_app, shown
from fleet.cli.lifecycle import EXIT_SHORT, confirm
from fleet.cli.render import plan_table, totals_lines
from fleet.cli.tables import compact_pool, wide_option
from fleet.model import Plan
from fleet.operations.up import UpPreview, prepare_up, preview_up, read_up
from fleet.provisioning.executor import ApplyReport
from fleet.provisioning.launching import Progress as Step
from fleet.safetext import safe_data
from fleet.secrets import is_credential_variable, references
from fleet.spec import FleetSpec


@click.command("up")
@click.argument("spec_path", metavar="SPEC|PLAN", type=click.Path(dir_okay=False))
@click.option("--yes", "-y", is_flag=True, help="Launch without asking for confirmation.")
@click.option("--dry-run", is_flag=True, help="Show the plan and what would change; launch nothing.")
@click.option(
    "--parallel",
    type=click.IntRange(min=1, max=256),
    default=32,
    show_default=True,
    help="Pools launched at the same time (1 = one pool after another).",
)
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="USD_PER_HOUR",
    help="Launch only if the plan costs at most this per hour (default: the spec's budget.max_per_hour, else $500/h).",
)
@wide_option
@json_option
@pass_app
def command(
    app: App, spec_path: str, yes: bool, dry_run: bool, parallel: int, max_cost: float | None, wide: bool, as_json: bool
) -> None:
    """Plan the fleet in SPEC and launch it (idempotent: a rerun only fills what is missing).

    Given PLAN, a file saved by `fleet plan SPEC --out PLAN`, applies that plan as it is, or
    refuses (nothing launched) when the spec or the offers' prices changed since it was made.
    """
    try:
        _up(app, spec_path, yes, dry_run, parallel, wide, as_json, max_cost)
    except KeyboardInterrupt:
        app.err.print(
            f"\n[yellow]interrupted[/]: `fleet up` stopped; instances already launched are recorded "
            f"and tagged, so rerunning `fleet up {spec_path}` is safe: it keeps them and fills the rest"
        )
        raise SystemExit(EXIT_INTERRUPTED) from None


#: Exit status after Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def _up(
    app: App, spec_path: str, yes: bool, dry_run: bool, parallel: int, wide: bool, as_json: bool, max_cost: float | None
) -> None:
    app.stage = "before launching anything"
    source = read_up(spec_path, app, dry_run=dry_run)
    if dry_run:
        _dry_run(app, preview_up(source, app), wide, as_json)
        return
    with prepare_up(source, app) as prepared:
        spec, plan = prepared.spec, prepared.plan
        if not as_json:
            _show_plan(app, plan, prepared.current, wide)
            _show_forwarded(app, spec)
        if not plan.feasible:
            app.warn(f"the plan is short of the spec: {plan.shortfall}")
        prepared.check_ceiling(max_cost)
        prompted = bool(prepared.changes) and not yes
        if prompted:
            confirm(f"Apply this plan to fleet {spec.name!r}?", yes=yes, as_json=as_json)
        with _ProgressView(app, enabled=not as_json) as view:
            report = prepared.apply(progress=view, max_workers=parallel, prompted=prompted)
    app.stage = f"after applying the plan; `fleet status {spec.name}` shows the fleet"
    if as_json:
        app.emit_json(safe_data(report.to_dict()))
    else:
        _summary(app, report)
    if not report.ok:
        raise SystemExit(EXIT_SHORT)


def _dry_run(app: App, preview: UpPreview, wide: bool, as_json: bool) -> None:
    fleet, plan, current, delta = preview.spec.name, preview.plan, preview.current, preview.changes
    if as_json:
        app.emit_json(
            {"dry_run": True, "fleet": fleet, "plan": json.loads(plan.to_json()), "current": current, "changes": delta}
        )
        return
    _show_plan(app, plan, current, wide)
    added = sum(n for n in delta.values() if n > 0)
    removed = -sum(n for n in delta.values() if n < 0)
    app.console.print(f"dry run: would launch {added} and terminate {removed} instance(s); nothing was changed")


def _show_plan(app: App, plan: Plan, current: Mapping[str, int], wide: bool) -> None:
    """The change `up` is about to make: the same table as `fleet plan` on a running fleet."""
    plan_table(app, plan, current, wide)
    for line in totals_lines(plan):
        app.console.print(line)
    if not plan.feasible:
        app.console.print(f"[yellow]short of the spec:[/] {plan.shortfall}")


def _show_forwarded(app: App, spec: FleetSpec) -> None:
    """Every variable of this machine the nodes will receive (``${env:NAME}`` in node.env/head.env),
    the credentials that ``node.forward_credentials`` lets through marked as such."""
    envs = [("node.env", spec.node.env)] + ([("head.env", spec.head.env)] if spec.head is not None else [])
    for field, env in envs:
        for name, refs in references(env).items():
            for ref in refs:
                credential = (
                    " [yellow](a credential: node.forward_credentials)[/]" if is_credential_variable(ref) else ""
                )
                app.console.print(f"forwarded to the nodes: {field}.{name} <- ${{env:{ref}}}{credential}")


class _ProgressView:
    """Progress bars per pool on stderr, fed by the executor's ``Progress`` steps (a
    ``fleet.operations.up.ProgressSink``); the bars appear with the first step."""

    def __init__(self, app: App, *, enabled: bool):
        self.app = app
        self.enabled = enabled
        self.bars: Any = None
        self.tasks: dict[str, int] = {}

    def __enter__(self) -> _ProgressView:
        return self

    def _start(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            console=self.app.err,
            transient=False,
        )
        self.bars.start()

    def __exit__(self, *exc: object) -> None:
        if self.bars is not None:
            self.bars.stop()

    def __call__(self, step: Step) -> None:
        if not self.enabled:
            return
        if self.bars is None:
            self._start()
        if step.kind == "launch":
            self.tasks[step.pool] = self.bars.add_task(compact_pool(step.pool), total=step.count, note="")
        elif step.kind == "launched" and step.pool in self.tasks:
            note = "" if step.count == step.total else f"[yellow]{shown(step.message)[:60]}[/]"
            self.bars.update(self.tasks.pop(step.pool), completed=step.count, note=note)
        elif step.kind in ("block", "replan", "note", "terminate"):
            self.bars.console.print(
                f"[dim]{step.kind}:[/] {step.pool + ': ' if step.pool else ''}{shown(step.message)}"
            )


def _summary(app: App, report: ApplyReport) -> None:
    running = sum(report.counts.values())
    wanted = sum(report.plan.counts().values())
    app.console.print(
        f"launched {len(report.launched)}, terminated {len(report.terminated)}; "
        f"fleet {report.fleet} runs {running} of {wanted} planned instances"
    )
    for failure in report.failures:
        app.console.print(
            f"  [yellow]{failure.error_kind}[/] {compact_pool(failure.pool)}: "
            f"{len(failure.instances)} of {failure.requested}: {shown(failure.error_message)}"
        )
    for prefix, reason in report.blocked:
        app.console.print(f"  blocked {prefix} for a while ({shown(reason)})")
    for note in report.notes:  # a provider that could not be listed, a launch to retry: said, not only in --json
        app.console.print(f"  [yellow]note:[/] {shown(note)}")
    if report.ok:
        app.console.print(f"[green]fleet {report.fleet} is up[/]; `fleet status {report.fleet}` shows it")
    else:
        missing = sum(report.missing.values())
        app.err.print(
            f"[red]fleet {report.fleet} is short[/] by {missing} instance(s) "
            f"({report.missing_weighted_gpus:g} weighted GPUs)"
            + (f"; plan: {report.plan.shortfall}" if report.plan.shortfall else "")
            + "; rerun `fleet up` later to fill it"
        )
