"""``fleet local ...``: watch and poke the embedded simulated cloud.

The cloud lives in ``$SPOTFLEET_LOCAL_CLOUD`` or ``<home>/localcloud``; commands that
change it create it (with default settings) when it does not exist yet.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from datetime import datetime, timezone

import click

from fleet.cli.app import App, json_option, pass_app
from fleet.cli.complete import instance_ids
from fleet.cli.lifecycle import confirm
from fleet.cli.tables import Column, pool_label, print_table, wide_option
from fleet.errors import FleetError
from fleet.model import Instance, Market
from providers.local import LocalCloud
from providers.local.vendors import FAULT_KINDS
from providers.registry import local_cloud_root

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd])")


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``15m``, ``2h``, ``1d``, ``1h30m`` (a bare number only alone);
    FleetError otherwise."""
    compact = text.strip().lower()
    if _NUMBER.fullmatch(compact):
        return float(compact)
    total, pos = 0.0, 0
    for m in _PART.finditer(compact):
        if m.start() != pos:
            break
        total, pos = total + float(m.group(1)) * _UNITS[m.group(2)], m.end()
    if not compact or pos != len(compact):
        raise FleetError(f"cannot read duration {text!r}; use seconds or units s/m/h/d, e.g. 90s, 15m, 2h, 1h30m")
    return total


def _cloud(app: App) -> LocalCloud:
    return LocalCloud.open(local_cloud_root(app.home))


def _sim_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds >= 86400:
        return f"{seconds // 86400}d{seconds % 86400 // 3600}h"
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _settings(cloud: LocalCloud) -> dict:
    return {
        "time_scale": cloud.time_scale,
        "seed": cloud.seed,
        "run_nodes": cloud.run_nodes,
        "api_latency": cloud.api_latency,
    }


def _summary(cloud: LocalCloud, everything: bool) -> dict:
    instances = cloud.all_instances(alive_only=not everything)
    all_rows = instances if everything else cloud.all_instances()
    counts = Counter(i.state.value for i in all_rows)
    now = cloud.now()
    return {
        "root": str(cloud.root),
        "now": now,
        "elapsed_seconds": now - cloud.start,
        **_settings(cloud),
        "counts": dict(sorted(counts.items())),
        "foreign": sum(1 for i in all_rows if not i.fleet and i.state.alive),
        "faults": cloud.faults(),
        "capacity_overrides": cloud.capacity_overrides(),
        "instances": [i.model_dump(mode="json") for i in instances],
    }


def _render(app: App, data: dict, limit: int, wide: bool = False) -> None:
    counts = data["counts"]
    alive = counts.get("pending", 0) + counts.get("running", 0)
    app.console.print(
        f"[bold]local cloud[/] {data['root']}\n"
        f"simulated time {_sim_time(data['now'])} UTC ({_age(data['elapsed_seconds'])} since start, "
        f"x{data['time_scale']:g}, seed {data['seed']})\n"
        f"instances: {alive} alive ({counts.get('pending', 0)} pending, {data['foreign']} foreign), "
        f"{counts.get('preempted', 0)} preempted, {counts.get('terminated', 0)} terminated"
    )
    for f in data["faults"]:
        app.console.print(f"fault: next {f['remaining']} launch(es) into {f['prefix']}* get [yellow]{f['kind']}[/]")
    for pool, n in data["capacity_overrides"].items():
        app.console.print(f"capacity pinned: {pool} = {n}")
    if not data["instances"]:
        return
    columns = [
        Column("id"),
        Column("fleet", drop=1),
        Column("pool"),
        Column("state"),
        Column("age", right=True, drop=2),
        Column("$/h", right=True),
    ]
    shown = data["instances"] if limit <= 0 else data["instances"][:limit]
    rows = []
    for raw in shown:
        inst = Instance.model_validate(raw)
        end = inst.ended_at if inst.ended_at is not None else data["now"]
        rows.append(
            [
                inst.id,
                inst.fleet or "[dim](foreign)[/]",
                pool_label(inst.pool.id, wide),
                inst.state.value,
                _age(end - inst.launched_at),
                f"{inst.price_per_hour:.2f}",
            ]
        )
    print_table(app.console, None, columns, rows, wide=wide)
    if not wide:
        app.console.print("[dim]--wide shows full pool ids (the form `fleet local capacity/foreign` take)[/]")
    if len(shown) < len(data["instances"]):
        app.console.print(f"[dim]{len(data['instances']) - len(shown)} more; use --limit 0 to show all[/]")


def _what_runs(cloud: LocalCloud) -> str:
    """`` with N running instances (M on-demand) of fleets a, b`` for a confirmation question."""
    alive = cloud.all_instances(alive_only=True)
    if not alive:
        return " (no instance runs)"
    on_demand = sum(1 for i in alive if i.pool.market is Market.ON_DEMAND)
    fleets = sorted({i.fleet for i in alive if i.fleet})
    named = f" of fleet(s) {', '.join(fleets)}" if fleets else ""
    return f" with {len(alive)} running instance(s) ({on_demand} on-demand){named}"


@click.group("local")
def command() -> None:
    """Watch and poke the embedded simulated cloud (backend: local)."""


@command.command("status")
@click.option("--all", "everything", is_flag=True, help="Include preempted and terminated instances.")
@click.option(
    "--watch",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Refresh every SECONDS (keeps the simulated cloud ticking: notices, preemptions).",
)
@click.option("--limit", type=int, default=50, show_default=True, help="Instance rows to show (0 = all).")
@wide_option
@json_option
@pass_app
def status(app: App, everything: bool, watch: float | None, limit: int, wide: bool, as_json: bool) -> None:
    """Simulated time, instances, pending faults."""
    root = local_cloud_root(app.home)
    if not LocalCloud.exists(root):
        if as_json:
            app.emit_json({"root": str(root), "exists": False})
        else:
            app.console.print(f"no local cloud at {root} yet; `fleet up` with `backend: local` creates one")
        return
    cloud = LocalCloud.open(root)
    if as_json:
        app.emit_json({"exists": True, **_summary(cloud, everything)})
        return
    if watch is None:
        _render(app, _summary(cloud, everything), limit, wide)
        return
    if watch <= 0:
        raise FleetError(f"--watch needs a positive number of seconds (got {watch})")
    try:
        while True:
            app.console.clear()
            _render(app, _summary(cloud, everything), limit, wide)
            time.sleep(watch)
    except KeyboardInterrupt:
        pass


@command.command("reset")
@click.option(
    "--time-scale",
    type=click.FloatRange(min=0),
    default=None,
    help="Simulated seconds per real second (default: keep; 60 = one hour per minute; 0 = frozen).",
)
@click.option("--seed", type=int, default=None, help="Market seed (default: keep).")
@click.option(
    "--run-nodes/--no-run-nodes",
    default=None,
    help="Run each instance's startup command as a real local process (default: keep).",
)
@click.option(
    "--api-latency",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="Real seconds each launch/list/terminate call takes, like a remote API (default: keep).",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_app
def reset(
    app: App,
    time_scale: float | None,
    seed: int | None,
    run_nodes: bool | None,
    api_latency: float | None,
    yes: bool,
    as_json: bool,
) -> None:
    """Delete every simulated instance, fault, notice and bucket; start a fresh cloud."""
    root = local_cloud_root(app.home)
    if LocalCloud.exists(root) and not yes:
        confirm(
            f"Delete the simulated cloud at {root}{_what_runs(LocalCloud.open(root))}, its buckets and notices?",
            yes=yes,
            as_json=as_json,
        )
    cloud = LocalCloud.reset(root, time_scale=time_scale, seed=seed, run_nodes=run_nodes, api_latency=api_latency)
    if as_json:
        app.emit_json({"root": str(cloud.root), **_settings(cloud)})
    else:
        nodes = ", runs nodes" if cloud.run_nodes else ""
        app.console.print(f"fresh local cloud at {cloud.root} (x{cloud.time_scale:g}, seed {cloud.seed}{nodes})")


@command.command("preempt")
@click.argument("instance_id", shell_complete=instance_ids)
@click.option("--notice", is_flag=True, help="Write the notice now and preempt after the vendor's notice window.")
@json_option
@pass_app
def preempt(app: App, instance_id: str, notice: bool, as_json: bool) -> None:
    """Take a spot instance back, as the provider would (on-demand instances are never preempted)."""
    cloud = _cloud(app)
    alive = next((i for i in cloud.all_instances(alive_only=True) if i.id == instance_id), None)
    if alive is not None and alive.pool.market is Market.ON_DEMAND:
        raise FleetError(
            f"{instance_id} is an on-demand instance: providers do not preempt those (only spot "
            "capacity is taken back); `fleet down` or the fleet's plan ends it"
        )
    inst = cloud.preempt(instance_id, notice=notice)
    if as_json:
        app.emit_json(inst.model_dump(mode="json"))
    elif inst.state.alive:
        app.console.print(f"{inst.id}: notice written; preempted in {inst.pool.provider}'s notice window")
    else:
        app.console.print(f"{inst.id}: preempted")


@command.command("advance")
@click.argument("duration")
@json_option
@pass_app
def advance(app: App, duration: str, as_json: bool) -> None:
    """Move the simulated clock forward (90s, 15m, 2h, 1d, 1h30m)."""
    cloud = _cloud(app)
    before = {i.id for i in cloud.all_instances(alive_only=True)}
    now = cloud.advance(parse_duration(duration))
    gone = sorted(before - {i.id for i in cloud.all_instances(alive_only=True)})
    if as_json:
        app.emit_json({"now": now, "elapsed_seconds": now - cloud.start, "ended": gone})
    else:
        app.console.print(f"simulated time {_sim_time(now)} UTC; {len(gone)} instance(s) ended")


@command.command("inject")
@click.argument("pool")
@click.argument("kind", type=click.Choice(FAULT_KINDS))
@click.option(
    "--count", type=click.IntRange(min=1), default=1, show_default=True, help="How many launches the fault affects."
)
@pass_app
def inject(app: App, pool: str, kind: str, count: int) -> None:
    """Make the next COUNT launches into pools starting with POOL fail with KIND."""
    _cloud(app).inject_fault(pool, kind, count)
    app.console.print(f"next {count} launch(es) into {pool}* get {kind}")


@command.command("foreign")
@click.argument("pool")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True)
@json_option
@pass_app
def foreign(app: App, pool: str, count: int, as_json: bool) -> None:
    """Start instances that belong to no fleet (spotfleet must never touch them)."""
    made = _cloud(app).launch_foreign(pool, count)
    if as_json:
        app.emit_json([i.model_dump(mode="json") for i in made])
    else:
        app.console.print(f"started {len(made)} foreign instance(s): {' '.join(i.id for i in made)}")


@command.command("capacity")
@click.argument("pool")
@click.argument("count", type=click.IntRange(min=0))
@pass_app
def capacity(app: App, pool: str, count: int) -> None:
    """Pin POOL's capacity to COUNT instances (spot pools still follow their trace)."""
    _cloud(app).set_capacity(pool, count)
    app.console.print(f"{pool}: capacity {count}")


@command.command("quota")
@click.argument("scope", required=False)
@click.argument("gpus", required=False, type=click.IntRange(min=0))
@click.option(
    "--market", type=click.Choice(["spot", "on-demand"]), default=None, help="Only this market (default: both)."
)
@click.option("--accelerator", default="", help="Only this accelerator, e.g. H100 (default: any).")
@click.option("--remove", is_flag=True, help="Remove the quota of SCOPE, --market and --accelerator.")
@json_option
@pass_app
def quota(
    app: App, scope: str | None, gpus: int | None, market: str | None, accelerator: str, remove: bool, as_json: bool
) -> None:
    """Set a GPU quota on SCOPE (provider or provider/region), or list quotas with no arguments.

    Launches past a quota get the vendor's quota error; `fleet plan` and `fleet up` plan within them.
    """
    cloud = _cloud(app)
    if scope is not None:
        if gpus is None and not remove:
            raise FleetError("give the quota in GPUs (e.g. `fleet local quota gcp/us-east4 16`) or --remove")
        cloud.set_quota(scope, None if remove else gpus, market or "", accelerator)
    rows = [q.model_dump(mode="json") | {"label": q.label} for q in cloud.quotas()]
    if as_json:
        app.emit_json(rows)
        return
    if not rows:
        app.console.print("no quotas set")
    for r in rows:
        app.console.print(f"{r['label']}: {r['in_use']:g} of {r['limit']:g} in use")
