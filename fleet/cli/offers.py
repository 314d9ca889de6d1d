"""``fleet offers``: browse the offer catalog (table or --json)."""

from __future__ import annotations

import click

from fleet.catalog import Catalog, CatalogInfo, matching
from fleet.cli.app import App, json_option, pass_app
from fleet.cli.tables import Column, pool_label, print_table, wide_option
from fleet.errors import FleetError
from fleet.model import Market, Offer
from providers.base import OfferQuery

#: Short labels for the interruption-estimate source column.
_SOURCE_LABEL = {"provider-prior": "prior", "placement-score": "score", "spot-advisor": "advisor"}


@click.command("offers")
@click.option("--accelerator", "-a", multiple=True, help="Accelerator name, e.g. H100 (repeatable).")
@click.option("--provider", "-p", multiple=True, help="Only these providers (repeatable).")
@click.option("--region", "-r", multiple=True, help="Only these regions (repeatable).")
@click.option("--spot", "market", flag_value="spot", help="Spot/preemptible offers only.")
@click.option("--on-demand", "market", flag_value="on-demand", help="On-demand offers only.")
@click.option("--gpus", type=int, help="Only nodes with exactly this many GPUs.")
@click.option("--max-price", type=float, help="Only offers at or below this USD per GPU-hour.")
@click.option("--limit", type=int, default=30, show_default=True, help="Rows to show (0 = all).")
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(dir_okay=False),
    help="The offers `fleet plan SPEC` weighs: from the spec's providers (live where it runs on a "
    "cloud, the local cloud's for backend: local), filtered by its settings, with the rates "
    "this fleet has seen.",
)
@wide_option
@json_option
@pass_app
def command(
    app: App,
    accelerator: tuple[str, ...],
    provider: tuple[str, ...],
    region: tuple[str, ...],
    market: str | None,
    gpus: int | None,
    max_price: float | None,
    limit: int,
    spec_path: str | None,
    wide: bool,
    as_json: bool,
) -> None:
    """List offers, cheapest per GPU-hour first: the shipped snapshot, or with --spec what
    `fleet plan` would weigh for that spec."""
    query = OfferQuery(
        accelerators=tuple(_accelerator(a) for a in accelerator),
        regions=region,
        spot=market != "on-demand",
        on_demand=market != "spot",
    )
    if spec_path:
        found, info = _spec_offers(app, spec_path)
        offers = [o for o in matching(found, query) if not provider or o.pool.provider in provider]
    else:
        offers, info = Catalog().offers(query, only=provider or None)
    offers = [
        o
        for o in offers
        if (gpus is None or o.gpus == gpus) and (max_price is None or o.price_per_gpu_hour <= max_price)
    ]
    offers.sort(key=lambda o: (o.price_per_gpu_hour, o.pool.id))
    shown = offers if limit <= 0 else offers[:limit]
    if as_json:
        app.emit_json(
            {
                "source": info.source,
                "detail": info.detail,
                "total": len(offers),
                "offers": [o.model_dump(mode="json") for o in shown],
            }
        )
        return
    columns = [
        Column("pool"),
        Column("market"),
        Column("node"),
        Column("$/h", right=True),
        Column("$/GPU-h", right=True),
        Column("int/h", right=True, drop=1),
        Column("from", drop=2),
        Column("capacity", right=True, wide=True),
    ]
    rows = []
    for o in shown:
        spot = o.market is not Market.ON_DEMAND
        rows.append(
            [
                pool_label(o.pool.id, wide),
                o.market.value,
                f"{o.gpus}x{o.accelerator}",
                f"{o.price_per_hour:.2f}",
                f"{o.price_per_gpu_hour:.3f}",
                f"{o.interruptions_per_hour:.3f}" if spot else "-",
                _SOURCE_LABEL.get(o.interruption_source.value, o.interruption_source.value) if spot else "-",
                "-" if o.capacity_hint is None else str(o.capacity_hint),
            ]
        )
    print_table(app.console, f"{len(offers)} offers, cheapest per GPU-hour first", columns, rows, wide=wide)
    app.console.print(
        f"[dim]$/h is per node; int/h: interruptions per instance-hour and where that estimate "
        f"comes from; offers: {info.source}: {info.detail}[/]"
    )
    if len(shown) < len(offers):
        app.console.print(f"[dim]{len(offers) - len(shown)} more; use --limit 0 to show all[/]")


def _spec_offers(app: App, spec_path: str) -> tuple[list[Offer], CatalogInfo]:
    """The offers `fleet plan` weighs for the spec at ``spec_path`` (its providers, settings and
    learned rates), and where they came from."""
    from fleet.cli.plan import learned_rates, offers_for_spec, providers_or_none
    from fleet.spec import load_spec

    spec = load_spec(spec_path)
    with app.err.status("gathering offers..."):
        providers = providers_or_none(spec, app)
        offers, info = offers_for_spec(spec, app, providers)
        return learned_rates(app, spec, offers, providers), info


def _accelerator(name: str) -> str:
    from fleet.accelerators import canonical, unknown_message

    canon = canonical(name)
    if canon is None:
        raise FleetError(f"--accelerator: {unknown_message(name)}")
    return canon
