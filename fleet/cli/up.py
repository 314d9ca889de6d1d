"""``fleet up SPEC``: plan, show, confirm, launch with progress, summarise. Rerunning converges.

Exit status: 0 when the fleet holds its plan, 3 when it ends short (what is missing and
why is printed), 1 for other errors, 2 for a bad spec.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Collection, Mapping
from typing import Any

import click

from fleet import crashpoints
from fleet.cli import saved_plan
from fleet.cli.app import App, json_option, pass_app, shown
from fleet.cli.lifecycle import EXIT_SHORT, confirm, store_of
from fleet.cli.plan import (
    blocked_pools,
    changes,
    learned_rates,
    offers_for_spec,
    plan_table,
    totals_lines,
    with_learned_rates,
)
from fleet.cli.runs import start_run
from fleet.cli.tables import compact_pool, wide_option
from fleet.errors import FleetError
from fleet.model import Plan
from fleet.nodelogs import record_bucket
from fleet.provisioning import ceiling
from fleet.provisioning.executor import ApplyReport, active_blocks, apply
from fleet.provisioning.launching import Progress as Step
from fleet.provisioning.reconcile import observe, on_demand_prices, sync
from fleet.provisioning.roles import fleet_node, start_head
from fleet.safetext import safe, safe_data
from fleet.secrets import is_credential_variable, references, resolve_env
from fleet.spec import FleetSpec, load_spec
from fleet.state import FleetStatus
from providers.base import account_quotas


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


def _refuse_unreadable(name: str, errors: Mapping[str, str]) -> None:
    """Launch nothing while a provider of the fleet cannot be listed: it may run instances of the
    fleet that a plan made without them would launch again elsewhere (as `fleet rebalance` does)."""
    if errors:
        said = "; ".join(f"{p}: could not list instances ({safe(e)})" for p, e in sorted(errors.items()))
        raise FleetError(
            f"{said}; fleet up launched nothing for {name}, because instances there would be "
            "launched twice; rerun when the provider answers, or disable it under `providers:`"
        )


#: Exit status after Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def _up(
    app: App, spec_path: str, yes: bool, dry_run: bool, parallel: int, wide: bool, as_json: bool, max_cost: float | None
) -> None:
    from fleet.planning.planner import plan as make_plan
    from providers.registry import providers_for

    app.stage = "before launching anything"
    saved = saved_plan.read(spec_path) if saved_plan.is_saved_plan(spec_path) else None
    spec = saved.spec if saved is not None else load_spec(spec_path)
    if not dry_run:  # a ${env:NAME} that is not set fails here, before anything is launched
        resolve_env(spec.node.env, os.environ)
    providers = providers_for(spec, app.home)
    offers, _info = offers_for_spec(spec, app, providers)
    if saved is not None:
        saved_plan.check_offers(saved, offers)
    quotas = account_quotas(providers)
    if dry_run:
        current = observe(providers, spec.name).counts()
        offers = learned_rates(app, spec, offers, providers)
        plan = (
            saved.plan
            if saved is not None
            else make_plan(spec, offers, current=current, blocked=blocked_pools(app, providers), quotas=quotas)
        )
        _dry_run(app, spec.name, plan, current, wide, as_json)
        return
    store = store_of(app, create=True)
    crashpoints.reached("store-opened")
    with store.lock(spec.name, "up"):
        obs = observe(providers, spec.name)
        _refuse_unreadable(spec.name, obs.errors)
        current = obs.counts()
        offers = with_learned_rates(spec, offers, providers, store)
        plan = (
            saved.plan
            if saved is not None
            else make_plan(spec, offers, current=current, blocked=active_blocks(store, providers), quotas=quotas)
        )
        if not as_json:
            _show_plan(app, plan, current, wide)
            _show_forwarded(app, spec)
        if not plan.feasible:
            app.warn(f"the plan is short of the spec: {plan.shortfall}")
        ceiling.check(plan, spec, max_cost)
        prompted = bool(changes(plan, current)) and not yes
        if prompted:
            confirm(f"Apply this plan to fleet {spec.name!r}?", yes=yes, as_json=as_json)
        previous = store.find_fleet(spec.name)
        if previous is not None and previous.status == FleetStatus.DOWN:  # the name is reused: a new run
            start_run(store, spec.name, at=max(obs.now.values(), default=time.time()))
        sync(store, obs, prices=on_demand_prices([plan]))
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
                for o in offers
            ]
            return make_plan(spec, left, current=now_running, blocked=blocked, quotas=account_quotas(providers))

        node = fleet_node(spec, providers, os.environ)
        record_bucket(store, spec.name, node.checkpoint_uri)  # where `fleet logs` finds node logs
        role_nodes = None
        with _ProgressView(app, enabled=not as_json) as view:
            if spec.head is not None:  # the head first; the workers get its address
                node, role_nodes = start_head(
                    spec,
                    plan,
                    providers,
                    store,
                    node=node,
                    current=current,
                    head_env=resolve_env(spec.head.env, os.environ),
                    progress=view,
                    max_workers=parallel,
                )
                obs, prompted = observe(providers, spec.name), True
            report = apply(
                plan,
                providers,
                store,
                progress=view,
                replan=None if saved is not None else replan,
                node=node,
                max_workers=parallel,
                observed=None if prompted else obs,  # a prompt may have taken a while
                role_nodes=role_nodes,
            )
        store.set_status(spec.name, FleetStatus.UP if report.ok else FleetStatus.SHORT)
    app.stage = f"after applying the plan; `fleet status {spec.name}` shows the fleet"
    if as_json:
        app.emit_json(safe_data(report.to_dict()))
    else:
        _summary(app, report)
    if not report.ok:
        raise SystemExit(EXIT_SHORT)


def _dry_run(app: App, fleet: str, plan: Plan, current: Mapping[str, int], wide: bool, as_json: bool) -> None:
    delta = changes(plan, current)
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
    """Progress bars per pool on stderr, fed by the executor's ``Progress`` steps."""

    def __init__(self, app: App, *, enabled: bool):
        self.app = app
        self.enabled = enabled
        self.bars: Any = None
        self.tasks: dict[str, int] = {}

    def __enter__(self) -> _ProgressView:
        if self.enabled:
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
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bars is not None:
            self.bars.stop()

    def __call__(self, step: Step) -> None:
        if self.bars is None:
            return
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
