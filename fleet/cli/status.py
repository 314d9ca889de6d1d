"""``fleet status NAME``: what runs now (from the providers), per pool and per instance, with
$/h, age, interruptions and cost so far. Reconciles the record unless another command holds
the fleet (then it shows the providers' view and says so)."""

from __future__ import annotations

import json
import time
from typing import Any

import click
from rich.console import Group
from rich.live import Live
from rich.table import Table

from fleet.provisioning.accounting import CostSummary, summarize
from fleet.cli.app import App, json_option, pass_app
from fleet.cli.lifecycle import FleetView, duration, look, money, short_pool, store_of
from fleet.model import Instance
from fleet.state import EventKind, FleetStatus, StateStore


@click.command("status")
@click.argument("name")
@click.option("--watch", "-w", is_flag=True, help="Refresh until interrupted (Ctrl-C).")
@click.option("--interval", type=click.FloatRange(min=0.2), default=2.0, show_default=True,
              help="Seconds between refreshes with --watch.")
@click.option("--times", type=click.IntRange(min=0), default=0, help="With --watch: stop after this many refreshes.")
@click.option("--limit", type=click.IntRange(min=0), default=30, show_default=True,
              help="Instance rows to show (0 = all).")
@json_option
@pass_app
def command(app: App, name: str, watch: bool, interval: float, times: int, limit: int, as_json: bool) -> None:
    """Show fleet NAME: instances, pools, state, $/h, age, interruptions, cost so far."""
    store = store_of(app)
    if not watch:
        data, view = snapshot(app, store, name)
        if as_json:
            app.emit_json(data)
        else:
            app.console.print(render(data, view, limit))
        return
    shown = 0
    try:
        if as_json:
            while times == 0 or shown < times:
                click.echo(json.dumps(snapshot(app, store, name)[0], default=str))
                shown += 1
                if times == 0 or shown < times:
                    time.sleep(interval)
            return
        data, view = snapshot(app, store, name)
        with Live(render(data, view, limit), console=app.console, auto_refresh=False) as live:
            shown = 1
            while times == 0 or shown < times:
                time.sleep(interval)
                data, view = snapshot(app, store, name)
                live.update(render(data, view, limit), refresh=True)
                shown += 1
    except KeyboardInterrupt:
        pass


def snapshot(app: App, store: StateStore, name: str) -> tuple[dict[str, Any], FleetView]:
    """The fleet as JSON-ready data (also what ``render`` draws)."""
    view = look(app, store, name, "status")
    records = store.instances(name)
    cost = summarize(records, view.clock)
    desired = view.plan.counts() if view.plan else {}
    running = view.obs.counts()
    interruptions: dict[str, int] = {}
    for r in records:
        if r.end_reason == EventKind.PREEMPTED:
            interruptions[r.pool] = interruptions.get(r.pool, 0) + 1
    prices = {r.id: r.price_per_hour for r in records}
    pools = [{"pool": p, "market": p.rsplit("/", 1)[1], "running": running.get(p, 0),
              "planned": desired.get(p, 0) if view.plan else None,
              "price_per_hour": sum(prices.get(i.id, i.price_per_hour) for i in view.obs.instances if i.pool.id == p),
              "interruptions": interruptions.get(p, 0)}
             for p in sorted(set(desired) | set(running) | set(interruptions))]
    instances = sorted(view.obs.instances, key=lambda i: (i.pool.id, i.launched_at, i.id))
    notices = {e.instance_id for e in store.events(name, kinds={EventKind.NOTICE})}
    data = {
        "fleet": name, "status": view.record.status, "backend": view.record.backend,
        "plan_id": view.plan.id if view.plan else None,
        "running": sum(running.values()), "planned": sum(desired.values()) if view.plan else None,
        "cost": cost.to_dict(), "pools": pools,
        "instances": [_instance(i, view.clock(i.pool.provider), i.id in notices) for i in instances],
        "stopped": [_stopped(i, view.clock(i.pool.provider)) for i in sorted(view.obs.stopped, key=lambda i: i.id)],
        "reconciled": view.synced,
        "busy": "" if view.synced else _holder(store, name),
        "discovered": len(view.result.discovered) if view.result else 0,
        "ended": [{"id": r.id, "reason": why} for r, why in view.result.ended] if view.result else [],
        "provider_errors": view.obs.errors,
    }
    return data, view


def _holder(store: StateStore, name: str) -> str:
    held = store.lock_holder(name)
    return held.describe() if held else "another fleet command"


def _instance(i: Instance, now: float, noticed: bool) -> dict[str, Any]:
    return {"id": i.id, "pool": i.pool.id, "market": i.pool.market.value, "state": i.state.value,
            "accelerator": i.accelerator, "gpus": i.gpus, "price_per_hour": i.price_per_hour,
            "launched_at": i.launched_at, "age_seconds": max(0.0, now - i.launched_at), "notice": noticed}


def _stopped(i: Instance, now: float) -> dict[str, Any]:
    """A paused instance that still bills (Vast outbid): its price is what it bills now (storage)."""
    since = i.ended_at if i.ended_at is not None else now
    return {"id": i.id, "pool": i.pool.id, "reason": i.reason or i.state.value, "since": since,
            "stopped_seconds": max(0.0, now - since), "storage_per_hour": i.price_per_hour}


def headline(name: str, status: str, running: int, planned: int | None, cost: CostSummary) -> str:
    """The one-line summary; ``planned`` is None when no applied plan is recorded (then it says why)."""
    saved = (f", saved {money(cost.savings)} ({cost.savings_fraction:.0%}) vs on-demand"
             if cost.savings is not None and cost.savings_fraction is not None else "")
    counts = f"{running} of {planned} planned instances running" if planned is not None else \
        f"{running} instance(s) running, no applied plan recorded ({_why_no_plan(status)})"
    return (f"fleet [bold]{name}[/] ({status}): {counts}, "
            f"{cost.running_gpus} GPUs, {money(cost.rate_per_hour, True)} now "
            f"(spot {money(cost.spot_rate_per_hour, True)}, on-demand {money(cost.on_demand_rate_per_hour, True)}); "
            f"cost so far {money(cost.cost_so_far)}{saved}; {cost.interruptions} interruption(s)")


def _why_no_plan(status: str) -> str:
    if status == FleetStatus.REPAIRED:
        return "the record was rebuilt from tags; `fleet up SPEC` plans it again"
    if status == FleetStatus.DOWN:
        return "the fleet was taken down"
    return "the last `fleet up` did not finish; run it again to apply a plan"


def render(data: dict[str, Any], view: FleetView, limit: int) -> Group:
    cost = CostSummary(**data["cost"])
    parts: list[Any] = [headline(data["fleet"], data["status"], data["running"], data["planned"], cost)]
    if data["busy"]:
        parts.append(f"[yellow]{data['busy']} holds this fleet right now: showing the providers' view, "
                     "the record was not updated[/]")
    for provider, error in data["provider_errors"].items():
        parts.append(f"[yellow]{provider}: could not list instances: {error}[/]")
    for held in data["stopped"]:
        parts.append(f"[yellow]{held['id']} {held['reason']} {duration(held['stopped_seconds'])} ago "
                     f"({short_pool(held['pool'])}): stopped, still billing storage "
                     f"{money(held['storage_per_hour'], True)}; re-bid it or `fleet down` ends it[/]")
    for ended in data["ended"]:
        parts.append(f"[yellow]{ended['id']} {ended['reason']}[/] since the last look")
    pools = Table(title="pools", title_justify="left")
    for col in ("pool", "market", "running", "planned", "$/h", "interruptions"):
        pools.add_column(col, justify="left" if col in ("pool", "market") else "right")
    for p in data["pools"]:
        style = "yellow" if p["planned"] is not None and p["running"] < p["planned"] else None
        pools.add_row(short_pool(p["pool"]), p["market"], str(p["running"]),
                      "-" if p["planned"] is None else str(p["planned"]),
                      money(p["price_per_hour"]), str(p["interruptions"]), style=style)
    parts.append(pools)
    rows = data["instances"] if limit == 0 else data["instances"][:limit]
    if rows:
        table = Table(title="instances", title_justify="left")
        for col in ("id", "pool", "market", "state", "$/h", "age"):
            table.add_column(col, justify="right" if col in ("$/h", "age") else "left")
        for i in rows:
            state = i["state"] + (" [yellow](notice)[/]" if i["notice"] else "")
            table.add_row(i["id"], short_pool(i["pool"]), i["market"], state, money(i["price_per_hour"]),
                          duration(i["age_seconds"]))
        parts.append(table)
        if len(rows) < len(data["instances"]):
            parts.append(f"[dim]{len(data['instances']) - len(rows)} more instances; --limit 0 shows all[/]")
    return Group(*parts)
