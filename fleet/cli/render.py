"""Drawings several commands share: a plan as a table (alone, or as a change against what runs),
its totals and placement lines (``fleet plan``, ``fleet up``), and a fleet's headline
(``fleet status``, ``fleet history``). Rendering only: the figures come from the use cases."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from fleet.cli.app import App, shown
from fleet.cli.tables import Column, pool_label, print_table
from fleet.model import HEAD, Market, Offer, Plan
from fleet.operations.plan import changes
from fleet.views.format import money

if TYPE_CHECKING:  # types only: `fleet plan` loads no state store, `fleet status` no catalog for them
    from fleet.catalog import CatalogInfo
    from fleet.provisioning.accounting import CostSummary


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
        lines.append(f"interconnect    `fleet up` creates the {c.interconnect} these nodes share")
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


def headline(
    name: str, status: str, running: int, planned: int | None, cost: CostSummary, unread: Collection[str] = ()
) -> list[str]:
    """The fleet in a few short lines (they fit 80 columns); ``$/h`` is what runs now costs per hour.

    ``planned`` is None when no applied plan is recorded (then it says why); ``unread``: the
    providers that could not be read (``running`` counts only the others, and says so)."""
    from fleet.views.status import UNKNOWN

    colour = {"up": "green", "short": "yellow", UNKNOWN: "red"}.get(status, "bold")
    saved = (
        f"; saved {money(cost.savings)} ({cost.savings_fraction:.0%}) vs the same nodes on-demand"
        if cost.savings is not None and cost.savings_fraction is not None
        else ""
    )
    counts = (
        f"{running} of {planned} planned instances running" if planned is not None else f"{running} instance(s) running"
    )
    if unread:
        counts = f"{', '.join(sorted(unread))} could not be read; {counts} on the others"
    why = [] if planned is not None else [f"no applied plan recorded: {_why_no_plan(status)}"]
    return [
        f"fleet [bold]{name}[/]: [{colour}]{status}[/], {counts} ({cost.running_gpus} GPUs)",
        *why,
        f"price now      {money(cost.rate_per_hour, True)} (spot {money(cost.spot_rate_per_hour, True)}, "
        f"on-demand {money(cost.on_demand_rate_per_hour, True)})",
        f"cost so far    {money(cost.cost_so_far)}{saved}",
        f"interruptions  {cost.interruptions}",
    ]


def _why_no_plan(status: str) -> str:
    from fleet.state import FleetStatus

    if status == FleetStatus.REPAIRED:
        return "the record was rebuilt from tags; `fleet up SPEC` plans it again"
    if status == FleetStatus.DOWN:
        return "the fleet was taken down"
    return "the last `fleet up` did not finish; run it again to apply a plan"


def bill_lines(bill: dict[str, Any]) -> list[str]:
    """Planned against billed (``fleet.views.bills.summary``) in a line, then one warning per
    instance billed beyond the budget, with what ``budget.cap_action`` does about it."""
    if not bill["instances"]:
        return []
    if not bill["read"]:
        return [f"billed         not read yet for the {bill['instances']} running instance(s)"]
    ratio = f", {bill['ratio']:.2f}x" if bill["ratio"] is not None else ""
    lines = [
        f"billed         {money(bill['billed_per_hour'], True)} for {bill['read']} of {bill['instances']} "
        f"instance(s) (planned {money(bill['planned_per_hour'], True)}{ratio})"
    ]
    act = {
        "warn": "warned only (budget.cap_action: warn)",
        "replace": "the rebalancer replaces it",
        "destroy": "the rebalancer terminates it",
    }[bill["cap_action"]]
    lines += [f"[yellow]over budget:[/] {shown(b['message'])}; {act}" for b in bill["breaches"]]
    return lines
