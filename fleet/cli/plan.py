"""``fleet plan SPEC``: the cheapest diversified fleet for a spec, its true cost and savings.

Exit status: 0 when the plan meets the spec, 3 when it cannot (the best partial plan is
still printed, with the limit that binds), 2 for a bad spec, 1 for other errors.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Mapping

import click
from rich.table import Table

from fleet.catalog import Catalog, CatalogInfo, filter_for_spec
from fleet.cli.app import App, json_option, pass_app
from fleet.errors import FleetError
from fleet.model import Market, Offer, Plan
from fleet.spec import Backend, FleetSpec, Strategy, load_spec
from providers.base import OfferQuery, Provider, account_quotas

EXIT_INFEASIBLE = 3


def offers_for_spec(spec: FleetSpec, app: App, providers: Mapping[str, Provider] | None = None
                    ) -> tuple[list[Offer], CatalogInfo]:
    """The offers the planner sees for ``spec``, and where they came from.

    ``backend: local`` asks the embedded local cloud (live simulated capacity);
    ``backend: cloud`` asks the registered provider adapters and, where there are none
    yet, uses the snapshot shipped with the package. Pass ``providers`` when the caller
    already holds them, so the clouds are opened once.
    """
    from providers.registry import providers_for

    try:
        catalog = Catalog(providers=dict(providers) if providers is not None else providers_for(spec, app.home))
    except FleetError:
        if spec.backend is Backend.LOCAL:
            raise
        catalog = Catalog()         # no live adapters in this version: plan from the snapshot
    offers, info = catalog.offers(OfferQuery(accelerators=tuple(spec.capacity.accelerators)))
    return filter_for_spec(offers, spec), info


def _providers_if_any(spec: FleetSpec, app: App) -> dict | None:
    """The spec's provider adapters, or ``None`` where there are none (snapshot planning)."""
    from providers.registry import providers_for

    try:
        return providers_for(spec, app.home)
    except FleetError:
        if spec.backend is Backend.LOCAL:
            raise
        return None


@click.command("plan")
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@click.option("--strategy", type=click.Choice([s.value for s in Strategy]),
              help="Override the spec's allocation strategy.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also save the plan as JSON here (for review, `fleet up`, Pulumi).")
@json_option
@pass_app
def command(app: App, spec_path: str, strategy: str | None, out: Path | None, as_json: bool) -> None:
    """Plan the fleet in SPEC: pools, counts, expected true cost and savings. Launches nothing."""
    from fleet.planning.planner import plan as make_plan     # scipy: imported only when planning

    spec = load_spec(spec_path)
    if strategy:
        spec = spec.model_copy(update={"strategy": Strategy(strategy)})
    with app.err.status("gathering offers and planning...") if not as_json else nullcontext():
        providers = _providers_if_any(spec, app)
        offers, info = offers_for_spec(spec, app, providers)
        result = make_plan(spec, offers, quotas=account_quotas(providers or {}))
    if out is not None:
        try:
            out.write_text(result.to_json() + "\n")
        except OSError as err:
            raise FleetError(f"cannot write the plan to {out}: {err.strerror}") from None
    if as_json:
        click.echo(result.to_json())
    else:
        show(app, result, info)
        if out is not None:
            app.console.print(f"[dim]plan saved to {out}[/]")
    if not result.feasible:
        raise SystemExit(EXIT_INFEASIBLE)


def show(app: App, p: Plan, info: CatalogInfo) -> None:
    """Allocations, totals, exclusions and the data source, for people."""
    table = Table(title=f"fleet {p.fleet}: plan {p.id} ({p.strategy})", title_justify="left")
    for col in ("provider", "region", "zone", "instance type", "accelerator", "GPUs", "market", "count", "$/h",
                "interruptions/h"):
        table.add_column(col, justify="right" if col in ("GPUs", "count", "$/h", "interruptions/h") else "left",
                         overflow="fold")
    for a in p.allocations:
        o = a.offer
        rate = "-" if o.market is Market.ON_DEMAND else f"{o.interruptions_per_hour:.3f}"
        table.add_row(o.pool.provider, o.pool.region, o.pool.zone or "-", o.pool.instance_type, o.accelerator,
                      str(o.gpus), o.market.value, str(a.count), f"{o.price_per_hour * a.count:,.2f}", rate)
    app.console.print(table)
    for line in totals_lines(p):
        app.console.print(line)
    if not p.feasible:
        app.console.print(f"[red]infeasible:[/] {p.shortfall} (best partial plan shown)")
    if p.exclusions:
        app.console.print("[bold]left out[/]")
        for e in p.exclusions:
            app.console.print(f"  {e.pools:>6} {e.reason}  [dim](e.g. {e.example})[/]")
    for note in p.notes:
        app.console.print(f"[dim]note: {note}[/]")
    fallback = f"; live prices failed for {', '.join(info.fallbacks)}" if info.fallbacks else ""
    app.console.print(f"[dim]offers: {info.source} ({info.detail}){fallback}[/]")


def totals_lines(p: Plan) -> list[str]:
    t = p.totals
    lines = [
        f"weighted GPUs   {t.weighted_gpus:g} of {t.target_weighted_gpus:g} "
        f"({t.on_demand_weighted_gpus:g} on-demand, {t.gpus} GPUs in {t.pools} pools)",
        f"price           ${t.price_per_hour:,.2f}/h",
        f"true cost       ${t.true_cost_per_hour:,.2f}/h, ${t.true_cost_per_weighted_gpu_hour:,.3f} per weighted "
        "GPU-hour (price + work lost to interruptions + restarts)",
        f"interruptions   {t.expected_interruptions_per_day:.1f} expected per day",
    ]
    if t.on_demand_alternative_per_hour is not None:
        saved = f", saves {t.savings_fraction:.0%}" if t.savings_fraction is not None else ""
        lines.append(f"vs on-demand    cheapest all-on-demand fleet ${t.on_demand_alternative_per_hour:,.2f}/h{saved}")
    if t.checkpoint_interval_seconds is not None:
        lines.append(f"checkpoint      every {_duration(t.checkpoint_interval_seconds)} of work (Young/Daly)")
    return lines


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
