"""``fleet simulate SPEC``: price a spec on recorded spot traces before spending money.

Replays per-zone availability traces (default: the GCP H100 traces shipped with the package)
through the spec's own rebalancing policy (``fleet.rebalance.decide`` and the planner) on a
virtual clock, with catalog prices from the offline snapshot, and the same figures for the
baselines and the offline optimum (``fleet.simulate``; the model is stated in docs/simulate.md).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from fleet.catalog import snapshot_offers
from fleet.cli.app import App, json_option, pass_app
from fleet.cli.local_cmd import parse_duration
from fleet.cli.tables import Column, print_table, wide_option
from fleet.errors import FleetError
from fleet.simulate import Report, SimOptions, simulate
from fleet.simulate.run import hazard_rates
from fleet.simulate.tracefile import ValueMeaning, load_traces, shipped_trace_dir
from fleet.spec import load_spec


@click.command("simulate")
@click.argument("spec_path", metavar="SPEC", type=click.Path(path_type=Path))
@click.option(
    "--traces",
    "traces_dir",
    type=click.Path(path_type=Path),
    default=None,
    metavar="DIR",
    help="Directory of per-zone JSON traces (default: the shipped GCP H100 traces).",
)
@click.option(
    "--days",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Simulate the first N days (default: the whole trace).",
)
@click.option("--interval", default="10m", show_default=True, help="Time between rebalancing passes.")
@click.option(
    "--cold-start",
    "cold_start",
    default="10m",
    show_default=True,
    help="Time from launch until a node does work (it is paid from launch).",
)
@click.option("--tick", default=None, help="Tick length for traces without metadata.gap_seconds (e.g. 10m).")
@click.option(
    "--values",
    "values",
    type=click.Choice([m.value for m in ValueMeaning]),
    default="zero",
    show_default=True,
    help="What a trace value means: zero = 0 is available (the shipped traces), "
    "one = 1 is available, count = instances available.",
)
@click.option(
    "--mapping",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="JSON file: trace name -> list of pool-id prefixes it drives (replaces the zone rule).",
)
@click.option(
    "--spare",
    type=click.IntRange(min=0, max=10_000),
    default=0,
    show_default=True,
    help="Plan this many weighted GPUs beyond the target (spare spot nodes).",
)
@click.option(
    "--rates",
    type=click.Choice(["catalog", "hazard"]),
    default="catalog",
    show_default=True,
    help="Spot interruption rates the policy plans with: the catalog's, or fitted from the traces' "
    "run lengths (fresh-node hazard).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random choices (count traces).")
@click.option(
    "--synthetic",
    type=click.IntRange(min=0),
    default=None,
    metavar="SEED",
    help="Replay traces generated with SEED from a model fitted to the traces (fleet.simulate.synth), "
    "as long as them, instead of the recorded ones.",
)
@click.option("--no-optimum", is_flag=True, help="Skip the offline optimum (an integer program).")
@click.option(
    "--optimum-time-limit",
    "optimum_time_limit",
    default=None,
    metavar="DURATION",
    help="Stop the optimum's solve after this long (e.g. 2m) and report the best schedule found.",
)
@click.option(
    "--chart",
    type=click.Path(path_type=Path),
    default=None,
    metavar="PNG",
    help="Write capacity and cost over time to a PNG (needs matplotlib: pip install 'spotfleet[chart]').",
)
@click.option("--save", is_flag=True, help="Keep the result for the spec's fleet name (`fleet dashboard` shows it).")
@wide_option
@json_option
@pass_app
def command(
    app: App,
    spec_path: Path,
    traces_dir: Path | None,
    days: float | None,
    interval: str,
    cold_start: str,
    tick: str | None,
    values: str,
    mapping: Path | None,
    spare: int,
    rates: str,
    seed: int,
    no_optimum: bool,
    synthetic: int | None,
    optimum_time_limit: str | None,
    chart: Path | None,
    save: bool,
    wide: bool,
    as_json: bool,
) -> None:
    """Simulate SPEC's fleet on spot traces against the baselines and the offline optimum."""
    spec = load_spec(spec_path)
    interval_s = _positive("--interval", interval)
    cold_s = parse_duration(cold_start)
    gap = int(_positive("--tick", tick)) if tick is not None else None
    traces = load_traces(traces_dir or shipped_trace_dir(), ValueMeaning(values), gap)
    if synthetic is not None:
        from fleet.simulate import synth

        traces = synth.generate(synth.fit(traces), len(traces[0].capacity), synthetic)
    pools = _mapping(mapping, {t.name for t in traces}) if mapping is not None else None
    if chart is not None:
        _need_matplotlib()
    limit = _positive("--optimum-time-limit", optimum_time_limit) if optimum_time_limit is not None else None
    options = SimOptions(
        interval_seconds=interval_s,
        cold_start_seconds=cold_s,
        days=days,
        seed=seed,
        spare=spare,
        optimum=not no_optimum,
        series=chart is not None,
        rates=rates,
        optimum_time_limit=limit,
    )
    started = time.perf_counter()
    with app.console.status("simulating") as status:

        def say(what: str, done: int, total: int) -> None:
            status.update(
                f"offline optimum: solving the integer program (HiGHS{f', at most {limit:g} s' if limit else ''})"
                if what == "optimum" and not done
                else f"{what}: tick {done:,} of {total:,}"
            )

        report = simulate(spec, snapshot_offers(), traces, options, pools, progress=say)
    elapsed = time.perf_counter() - started
    if chart is not None:
        from fleet.simulate.chart import draw

        draw(report, chart)
    data = to_dict(report)
    data["wall_seconds"] = round(elapsed, 3)
    if save:
        from fleet.simulate import saved

        where = saved.save(app.home, spec.name, data)
        app.err.print(f"saved to {where} (`fleet dashboard` shows it on fleet {spec.name}'s page)")
    if as_json:
        app.emit_json(data)
        return
    _show(app, data, wide)


def _positive(flag: str, text: str) -> float:
    seconds = parse_duration(text)
    if seconds <= 0:
        raise FleetError(f"{flag} {text}: give a positive duration such as 10m")
    return seconds


def _mapping(path: Path, names: set[str]) -> dict[str, list[str]]:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise FleetError(f"--mapping {path}: cannot read it as JSON ({err})") from None
    if not isinstance(raw, dict) or not all(
        isinstance(v, list) and all(isinstance(p, str) for p in v) for v in raw.values()
    ):
        raise FleetError(f"--mapping {path}: expected an object of trace name -> list of pool-id prefixes")
    unknown = sorted(set(raw) - names)
    if unknown:
        raise FleetError(f"--mapping {path}: no trace named {unknown[0]!r}; traces: {', '.join(sorted(names))}")
    return raw


def _need_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise FleetError("--chart needs matplotlib: pip install 'spotfleet[chart]'") from None


def to_dict(report: Report) -> dict[str, Any]:
    """The report as JSON-ready data (money in USD, shares in [0, 1])."""
    od = report.on_demand_cost
    best = report.optimum.cost if report.optimum is not None else None
    rows = []
    planned = {o.pool.id: o.interruptions_per_hour for o in report.replay.offers}
    fitted = hazard_rates(report.replay)
    for o in report.outcomes:
        rows.append(
            {
                "policy": o.policy,
                "at_target": o.at_target,
                "at_critical": o.at_critical,
                "cost": round(o.cost, 2),
                "cost_share_of_on_demand": o.cost / od if od else None,
                "cost_multiple_of_optimum": o.cost / best if best else None,
                "interruptions": o.interruptions,
                "work_lost_gpu_hours": round(o.work_lost_gpu_hours, 3),
                "on_demand_node_hours": round(o.on_demand_node_hours, 3),
                "spot_node_hours": round(o.spot_node_hours, 3),
                "launches": o.launches,
                "failed_launches": o.failed_launches,
                "max_spend_per_hour": round(o.max_spend_per_hour, 4),
                "pools": {
                    p: {
                        "hours": round(f.hours, 3),
                        "interruptions": f.interruptions,
                        "predicted_interruptions": round(f.predicted, 3),
                        "planned_rate_per_hour": round(planned.get(p, 0.0), 5),
                        "hazard_rate_per_hour": round(fitted.get(p, 0.0), 5),
                        "realised_rate_per_hour": round(f.interruptions / f.hours, 5) if f.hours else None,
                    }
                    for p, f in o.pools.items()
                },
            }
        )
    r = report.replay
    return {
        "ticks": r.ticks,
        "tick_seconds": r.tick_seconds,
        "hours": r.ticks * r.tick_seconds / 3600,
        "interval_ticks": report.interval_ticks,
        "cold_start_ticks": report.cold_ticks,
        "seed": report.options.seed,
        "spare": report.options.spare,
        "rates": report.options.rates,
        "pools": dict(r.trace_of),
        "unmapped_pools": list(r.unmapped),
        "unused_traces": list(r.unused),
        "policies": rows,
        "optimum": None
        if report.optimum is None
        else {
            "cost": best,
            "status": report.optimum.status,
            "cost_share_of_on_demand": best / od if best and od else None,
        },
        "notes": list(report.notes),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}%"


#: The report's columns: at 80 columns the least telling ones are dropped (highest ``drop``
#: first, as ``plan`` and ``status`` do) rather than a number cut; ``--wide`` is not needed
#: for the figures that matter (availability, cost).
COLUMNS = (
    Column("policy"),
    Column("at target", right=True),
    Column("critical", right=True),
    Column("cost $", right=True),
    Column("of OD", right=True, drop=5),
    Column("x opt", right=True, drop=1),
    Column("lost", right=True, drop=2),
    Column("work lost", right=True, drop=3),
    Column("OD node-h", right=True, drop=4),
)


def _show(app: App, data: dict[str, Any], wide: bool = False) -> None:
    rows = []
    for p in data["policies"]:
        mult = p["cost_multiple_of_optimum"]
        rows.append(
            [
                escape(p["policy"]),
                _pct(p["at_target"]),
                _pct(p["at_critical"]),
                f"{p['cost']:,.2f}",
                _pct(p["cost_share_of_on_demand"]),
                "-" if mult is None else f"{mult:.3f}",
                str(p["interruptions"]),
                f"{p['work_lost_gpu_hours']:.1f}",
                f"{p['on_demand_node_hours']:.1f}",
            ]
        )
    opt = data["optimum"]
    if opt is not None and opt["cost"] is not None:
        rows.append(
            [
                "offline optimum",
                "100.00%",
                "100.00%",
                f"{opt['cost']:,.2f}",
                _pct(opt["cost_share_of_on_demand"]),
                "1.000",
                "-",
                "-",
                "-",
            ]
        )
    title = (
        f"{data['hours']:.0f} h on {len(set(data['pools'].values()))} zone traces, "
        f"{len(data['pools'])} spot pools (cold start {data['cold_start_ticks']} tick(s))"
    )
    print_table(app.console, title, COLUMNS, rows, wide=wide)
    app.console.print(
        "of OD: cost as a share of all on-demand; x opt: multiple of the offline optimum (a lower "
        "bound at 100% availability); lost: interruptions; work lost: GPU-hours since checkpoints"
    )
    if data["unmapped_pools"]:
        app.console.print(
            f"{len(data['unmapped_pools'])} spot pool(s) without a trace left out "
            f"(e.g. {data['unmapped_pools'][0]}); map them with --mapping"
        )
    if opt is not None and opt["status"] != "optimal":
        app.console.print(f"offline optimum: {opt['status']}")
    for note in data["notes"]:
        app.console.print(note)
