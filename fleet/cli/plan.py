"""``fleet plan SPEC``: the cheapest diversified fleet for a spec, its true cost and savings.

Exit status: 0 when the plan meets the spec, 3 when it cannot (the best partial plan is
still printed, with the limit that binds), 2 for a bad spec, 1 for other errors.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from fleet.catalog import CPU, Catalog, CatalogInfo, cpu_offers, filter_for_spec
from fleet.cli.app import App, json_option, pass_app, shown
from fleet.cli.tables import Column, pool_label, print_table, wide_option
from fleet.errors import FleetError
from fleet.model import HEAD, Market, Offer, Plan
from fleet.spec import Backend, FleetSpec, Strategy, load_spec
from providers.base import OfferQuery, Provider, account_quotas

if TYPE_CHECKING:
    from fleet.state import StateStore

T = TypeVar("T")

EXIT_INFEASIBLE = 3


def offers_for_spec(
    spec: FleetSpec, app: App, providers: Mapping[str, Provider] | None = None, *, snapshot_for: Collection[str] = ()
) -> tuple[list[Offer], CatalogInfo]:
    """The offers the planner sees for ``spec``, and where they came from.

    ``backend: local`` asks the embedded local cloud (live simulated capacity);
    ``backend: cloud`` asks the registered provider adapters and, where there are none
    yet, uses the snapshot shipped with the package. Pass ``providers`` when the caller
    already holds them, so the clouds are opened once, and ``snapshot_for`` to price
    providers that cannot launch here (``cannot_launch``) from the snapshot beside them.
    """
    from providers.registry import providers_for

    try:
        catalog = Catalog(providers=dict(providers) if providers is not None else providers_for(spec, app.home))
    except FleetError:
        if spec.backend is Backend.LOCAL:
            raise
        catalog = Catalog()  # no live adapters in this version: plan from the snapshot
    query = OfferQuery(accelerators=tuple(spec.capacity.accelerators))
    offers, info = catalog.offers(query)
    if catalog.providers and snapshot_for:
        offers += Catalog().offers(query, only=snapshot_for)[0]
    offers = filter_for_spec(offers, spec)
    if spec.head is not None:  # CPU types for the head; live adapters may not list them
        cpu = [o for o in catalog.offers(OfferQuery(accelerators=(CPU,), spot=False))[0] if o.accelerator == CPU]
        listed = {o.pool.provider for o in cpu}
        offers += cpu + [
            o
            for o in cpu_offers()
            if o.pool.provider not in listed
            and spec.backend is not Backend.LOCAL
            and spec.provider_settings(o.pool.provider)
        ]
    return offers, info


def _from_store(app: App, providers: Mapping[str, Provider], read: Callable[[StateStore], T], empty: T) -> T:
    """``read(store)`` on the state store when one exists, without creating one; ``empty``
    when there is none (or no provider to relate it to) or its record cannot be read."""
    if not providers:  # the state store's modules are imported only when there is one to read
        return empty
    from fleet.cli.lifecycle import store_of
    from fleet.state.db import is_postgres_url

    if not (is_postgres_url(app.state_url) or Path(app.state_url).exists()):
        return empty
    try:
        store = store_of(app)
    except FleetError:  # an unreadable record: `fleet up` and `repair` say why
        return empty
    try:
        return read(store)
    finally:
        store.close()


def blocked_pools(app: App, providers: Mapping[str, Provider]) -> list[str]:
    """Pools blocked in the state store (capacity or quota errors), without creating a store."""

    def read(store: StateStore) -> list[str]:
        from fleet.provisioning.executor import active_blocks

        return active_blocks(store, providers)

    return _from_store(app, providers, read, [])


def with_learned_rates(
    spec: FleetSpec, offers: list[Offer], providers: Mapping[str, Provider], store: StateStore
) -> list[Offer]:
    """``offers`` with each spot pool's interruption rate updated from what this fleet saw
    there (the rebalancer's Gamma-Poisson update, ``fleet.rebalance.learning``), so `plan`,
    `up` and `rebalance` weigh pools alike. A fleet with no history keeps the catalog's rates."""
    from fleet.rebalance.inputs import fleet_exposure
    from fleet.rebalance.learning import learned_offers

    now = max((p.now() for p in providers.values()), default=0.0)
    return learned_offers(offers, fleet_exposure(store, spec.name, now), spec.rebalance.prior_hours)


def learned_rates(app: App, spec: FleetSpec, offers: list[Offer], providers: Mapping[str, Provider]) -> list[Offer]:
    """:func:`with_learned_rates` from the state store when there is one, without creating it."""
    return _from_store(app, providers, lambda store: with_learned_rates(spec, offers, providers, store), offers)


def running_now(providers: Mapping[str, Provider], fleet: str) -> dict[str, int]:
    """Instances per pool the providers run for ``fleet`` now (by tag); empty when none runs."""
    if not providers:
        return {}
    from fleet.provisioning.reconcile import observe

    return observe(providers, fleet).counts()


def providers_or_none(spec: FleetSpec, app: App) -> dict[str, Provider]:
    """The spec's provider adapters that can launch here; none (plan from the snapshot) where one
    cannot be set up."""
    from providers.registry import providers_for

    try:
        return dict(providers_for(spec, app.home, launchable_only=True))
    except FleetError:
        if spec.backend is Backend.LOCAL:
            raise
        return {}


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
    from fleet.planning.planner import plan as make_plan  # scipy: imported only when planning
    from providers.registry import cannot_launch

    spec = load_spec(spec_path)
    file_hash = spec.spec_hash()  # what `fleet up FILE` compares the spec file with
    if strategy:
        spec = spec.model_copy(update={"strategy": Strategy(strategy)})
    blocked = cannot_launch(spec)
    with app.err.status("gathering offers and planning...") if not as_json else nullcontext():
        providers = providers_or_none(spec, app)
        offers, info = offers_for_spec(spec, app, providers, snapshot_for=blocked)
        offers = learned_rates(app, spec, offers, providers)
        current = running_now(providers, spec.name)
        result = make_plan(
            spec, offers, current=current, blocked=blocked_pools(app, providers), quotas=account_quotas(providers)
        )
    marks = [_cannot_launch_line(result, name, why) for name, why in blocked.items()]
    saved = result.model_copy(update={"notes": result.notes + tuple(marks)}) if marks else result
    if out is not None:
        from fleet.cli.saved_plan import write

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
        show(app, result, info, current=current or None, wide=wide)
        from rich.markup import escape

        for line in marks:
            app.console.print(f"[yellow]{escape(line)}[/]")
        if out is not None:
            app.console.print(f"[dim]plan saved to {out}[/]")
    if not result.feasible:
        raise SystemExit(EXIT_INFEASIBLE)


def _cannot_launch_line(plan: Plan, provider: str, why: str) -> str:
    """The mark ``fleet plan`` puts on a provider ``fleet up`` cannot launch on (also a plan note)."""
    used = sum(a.count for a in plan.allocations if a.offer.pool.provider == provider)
    share = f", {used} instance(s) of this plan" if used else ""
    return (
        f"cannot launch here: {provider} ({why}); priced from the snapshot{share}; `fleet up` refuses this "
        "spec until it is removed from `providers:`"
    )


def changes(plan: Plan, current: Mapping[str, int]) -> dict[str, int]:
    """Pool -> instances to launch (positive) or terminate (negative) to go from ``current`` to ``plan``."""
    wanted = plan.counts()
    return {
        p: wanted.get(p, 0) - current.get(p, 0)
        for p in sorted(set(wanted) | set(current))
        if wanted.get(p, 0) != current.get(p, 0)
    }


def _change_cell(now: int, want: int) -> str:
    if want > now:
        return f"[green]launch {want - now}[/]"
    if want < now:
        return f"[red]terminate {now - want}[/]"
    return "keep"


def plan_table(app: App, p: Plan, current: Mapping[str, int] | None, wide: bool) -> None:
    """The plan's pools; with ``current`` (what runs now) as a change per pool, like ``terraform plan``.

    ``$/h`` is what the row costs per hour (count x node price), here as in every table.
    """
    offers = {a.offer.pool.id: (a.offer, p.counts().get(a.offer.pool.id, 0)) for a in p.allocations}
    heads = {a.offer.pool.id for a in p.role_allocations(HEAD)}
    pools = sorted(set(offers) | set(current or {}))
    columns = [Column("pool"), Column("market"), Column("node", drop=2)]
    columns += (
        [Column("now", right=True), Column("plan", right=True), Column("change")]
        if current is not None
        else [Column("count", right=True)]
    )
    columns += [
        Column("$/h", right=True),
        Column("$/GPU-h", right=True, wide=True),
        Column("int/h", right=True, drop=1),
        Column("int/h from", wide=True),
    ]
    rows = []
    for pool in pools:
        o, n = offers.get(pool, (None, 0))
        counts = (
            [str(current.get(pool, 0)), str(n), _change_cell(current.get(pool, 0), n)]
            if current is not None
            else [str(n)]
        )
        spot = o is not None and o.market is Market.SPOT
        market = pool.rsplit("/", 1)[1] + (" (head)" if pool in heads else "")
        rows.append(
            [
                pool_label(pool, wide),
                market,
                _node_cell(o),
                *counts,
                f"{o.price_per_hour * n:,.2f}" if o else "-",
                f"{o.price_per_gpu_hour:.3f}" if o and o.gpus else "-",
                f"{o.interruptions_per_hour:.3f}" if spot else "-",
                o.interruption_source.value if spot else "-",
            ]
        )
    if current is None:
        title = f"fleet {p.fleet}: plan {p.id} ({p.strategy})"
    else:
        title = f"fleet {p.fleet}: plan {p.id} ({p.strategy}) against what runs now"
    print_table(app.console, title, columns, rows, wide=wide)
    if current is not None:
        delta = changes(p, current)
        launch = sum(n for n in delta.values() if n > 0)
        terminate = -sum(n for n in delta.values() if n < 0)
        keep = sum(min(current.get(q, 0), p.counts().get(q, 0)) for q in current)
        app.console.print(f"change: keep {keep}, launch {launch}, terminate {terminate} instance(s)")


def _node_cell(o: Offer | None) -> str:
    if o is None:
        return "-"
    return f"{o.gpus}x{o.accelerator}" if o.gpus else f"{o.vcpus or 0:g} vCPU"


def show(app: App, p: Plan, info: CatalogInfo, *, current: Mapping[str, int] | None = None, wide: bool = False) -> None:
    """Allocations (or the change against ``current``), totals, exclusions and the data source."""
    plan_table(app, p, current, wide)
    for line in totals_lines(p) + placement_lines(p):
        app.console.print(line)
    if not p.feasible:
        app.console.print(f"[red]infeasible:[/] {p.shortfall} (best partial plan shown)")
    if p.exclusions:
        app.console.print("[bold]left out[/]")
        for e in p.exclusions:
            app.console.print(f"  {e.pools:>5} {e.reason} [dim](e.g. {pool_label(e.example, wide)})[/]")
    for note in p.notes:
        app.console.print(f"[dim]note: {shown(note)}[/]")
    fallback = f"; live prices failed for {', '.join(info.fallbacks)}" if info.fallbacks else ""
    app.console.print(f"[dim]offers: {info.source}: {info.detail}{fallback}[/]")


def totals_lines(p: Plan) -> list[str]:
    """The plan's totals, one short line each (they fit 80 columns)."""
    t = p.totals
    lines = [
        f"weighted GPUs   {t.weighted_gpus:g} of {t.target_weighted_gpus:g} "
        f"({t.on_demand_weighted_gpus:g} on-demand; {t.gpus} GPUs in {t.pools} pools)",
        f"price           ${t.price_per_hour:,.2f}/h (the sum of the $/h column)",
        f"true cost       ${t.true_cost_per_hour:,.2f}/h, ${t.true_cost_per_weighted_gpu_hour:,.3f} per weighted "
        "GPU-hour",
        "                (price + work lost to interruptions + restarts)",
        f"interruptions   {t.expected_interruptions_per_day:.1f} expected per day",
    ]
    if t.on_demand_alternative_per_hour is not None:
        saved = f"saves {t.savings_fraction:.0%} " if t.savings_fraction is not None else ""
        lines.append(
            f"vs on-demand    {saved}vs the cheapest all-on-demand fleet (${t.on_demand_alternative_per_hour:,.2f}/h)"
        )
    if t.checkpoint_interval_seconds is not None:
        lines.append(f"checkpoint      every {_duration(t.checkpoint_interval_seconds)} of work (Young/Daly)")
    return lines


def placement_lines(p: Plan) -> list[str]:
    """Which domain a placed plan chose, of how many, and what the next best would cost."""
    c = p.placement
    if c is None:
        return []
    lines = [f"placement       one {c.level}: {c.domain} (best of {c.domains}, {c.solved} solved)"]
    if c.runner_up and c.runner_up_objective is not None:
        more = f" (+{c.runner_up_objective / c.objective - 1:.1%})" if c.objective > 0 else ""
        lines.append(f"next best       {c.runner_up}: {_metric(c.runner_up_objective, c.metric)}{more}")
    else:
        lines.append(f"next best       none: no other {c.level} can meet the spec")
    if c.interconnect:
        lines.append(f"interconnect    wants a {c.interconnect}")
    return lines


def _metric(value: float, metric: str) -> str:
    if metric.endswith("$/h"):
        return f"${value:,.2f}/h{metric.removesuffix('$/h').rstrip() and ' ' + metric.removesuffix(' $/h')}"
    return f"{value:,.4g} {metric}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
