"""One fleet now, as ``fleet status NAME --json`` prints it and the dashboard shows it.

``snapshot`` reads the fleet from its providers (reconciling the record where the lock allows,
as ``fleet status`` does) and returns JSON-ready data: status, counts, cost, pools,
instances. ``overview`` is one such summary per fleet in the store (``fleet status``
without NAME). Provider text in the result is made safe (``fleet.safetext.safe_data``).

``planned_per_hour`` is the applied plan's price; ``billed_per_hour`` is what the providers
say they charge for the running instances whose bill was read back
(``fleet.provisioning.billing``), ``None`` while none was. ``bill`` compares the two over the
same instances (``billed_per_hour`` against their planned prices, and how many were read) and
lists the instances that bill beyond the spec's budget (``fleet.views.bills``). Each
instance carries its planned and billed rate, the billed rate's source and the rental kind.
``cost.cost_so_far`` is at the billed rate where one was read and the planned price otherwise
(``cost_basis``: ``billed``, ``planned`` or ``mixed``; ``planned_cost_so_far`` at planned prices
alone, ``fleet.views.bills.accrued``); the rest of ``cost`` (spot/on-demand split, savings) stays
at planned prices.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from fleet.errors import FleetError
from fleet.model import Instance
from fleet.operations.look import FleetView, look
from fleet.operations.workspace import Workspace, readable_store, store_exists
from fleet.provisioning.accounting import summarize
from fleet.rebalance.bills import Limits
from fleet.safetext import safe_data
from fleet.state import EventKind, FleetStatus, InstanceRecord, StateStore
from fleet.state.runs import current_run, instances_of
from fleet.views import bills

#: The status of a fleet whose record or providers could not be opened at all.
ERROR = "error"


def snapshot(app: Workspace, store: StateStore, name: str) -> tuple[dict[str, Any], FleetView]:
    """The fleet as JSON-ready data (also what ``render`` draws)."""
    view = look(app, store, name, "status")
    run = current_run(store, name)
    records = instances_of(run, store.instances(name), store.events(name) if run.after_event else ())
    cost = summarize(records, view.clock)
    desired = view.plan.counts() if view.plan else {}
    running = view.obs.counts()
    interruptions: dict[str, int] = {}
    for r in records:
        if r.end_reason == EventKind.PREEMPTED:
            interruptions[r.pool] = interruptions.get(r.pool, 0) + 1
    prices = {r.id: r.price_per_hour for r in records}
    unread = view.obs.errors
    pools = [
        {
            "pool": p,
            "market": p.rsplit("/", 1)[1],
            "running": None if p.split("/", 1)[0] in unread else running.get(p, 0),
            "planned": desired.get(p, 0) if view.plan else None,
            "price_per_hour": sum(prices.get(i.id, i.price_per_hour) for i in view.obs.instances if i.pool.id == p),
            "interruptions": interruptions.get(p, 0),
        }
        for p in sorted(set(desired) | set(running) | set(interruptions))
    ]
    instances = sorted(view.obs.instances, key=lambda i: (i.pool.id, i.launched_at, i.id))
    notices = {e.instance_id for e in store.events(name, kinds={EventKind.NOTICE})}
    by_id = {r.id: r for r in records}
    alive = [by_id[i.id] for i in instances if i.id in by_id]
    bill = bills.summary(alive, Limits.of(view.record.to_dict()["spec"]))  # the spec is not built: status stays light
    accrued = bills.accrued(records, view.clock)  # cost so far at the billed rate where one was read
    data = {
        "fleet": name,
        "status": condition(view.record.status, running, desired, unread),
        "recorded_status": view.record.status,
        "backend": view.record.backend,
        "plan_id": view.plan.id if view.plan else None,
        "run": run.number,
        "run_started_at": run.started_at,
        "running": sum(running.values()),
        "planned": sum(desired.values()) if view.plan else None,
        "cost": {**cost.to_dict(), "cost_so_far": accrued["cost_so_far"]},
        "cost_basis": accrued["cost_basis"],
        "planned_cost_so_far": accrued["planned_cost_so_far"],
        "pools": pools,
        "planned_per_hour": view.plan.price_per_hour if view.plan else None,
        "billed_per_hour": bill["billed_per_hour"],
        "bill": bill,
        "instances": [_instance(i, view.clock(i.pool.provider), i.id in notices, by_id.get(i.id)) for i in instances],
        "stopped": [_stopped(i, view.clock(i.pool.provider)) for i in sorted(view.obs.stopped, key=lambda i: i.id)],
        "reconciled": view.synced,
        "busy": "" if view.synced or view.unwritable else _holder(store, name),
        "state_unwritable": view.unwritable,
        "discovered": len(view.result.discovered) if view.result else 0,
        "ended": [{"id": r.id, "reason": why} for r, why in view.result.ended] if view.result else [],
        "provider_errors": view.obs.errors,
    }
    return safe_data(data), view  # ids, reasons and errors are provider text


def _holder(store: StateStore, name: str) -> str:
    held = store.lock_holder(name)
    return held.describe() if held else "another fleet command"


def _instance(i: Instance, now: float, noticed: bool, record: InstanceRecord | None = None) -> dict[str, Any]:
    return {
        "id": i.id,
        "pool": i.pool.id,
        "market": i.pool.market.value,
        "state": i.state.value,
        "accelerator": i.accelerator,
        "gpus": i.gpus,
        "price_per_hour": i.price_per_hour,
        **(
            bills.row(record)
            if record
            else {"planned_per_hour": None, "billed_per_hour": None, "billed_source": "", "rental": ""}
        ),
        "launched_at": i.launched_at,
        "age_seconds": max(0.0, now - i.launched_at),
        "notice": noticed,
    }


def _stopped(i: Instance, now: float) -> dict[str, Any]:
    """A paused instance that still bills (Vast outbid): its price is what it bills now (storage)."""
    since = i.ended_at if i.ended_at is not None else now
    return {
        "id": i.id,
        "pool": i.pool.id,
        "reason": i.reason or i.state.value,
        "since": since,
        "stopped_seconds": max(0.0, now - since),
        "storage_per_hour": i.price_per_hour,
    }


#: The status shown when a provider could not be read: what runs there is not known.
UNKNOWN = "unknown"


def condition(recorded: str, running: dict[str, int], planned: dict[str, int], unread: Collection[str] = ()) -> str:
    """What is true of the fleet now, from what runs against its latest applied plan: ``unknown``
    when a provider (``unread``) could not be read, ``up`` when every planned instance runs,
    ``short`` when any is missing (``fleet up`` ended short, was interrupted, or instances were
    lost since), else the recorded status (``down``, ``repaired``, or ``planned`` before any plan
    was applied)."""
    if unread:
        return UNKNOWN
    if recorded == FleetStatus.DOWN or not planned:
        return recorded
    met = all(running.get(pool, 0) >= n for pool, n in planned.items())
    return FleetStatus.UP if met else FleetStatus.SHORT


def overview(app: Workspace, *, include_down: bool) -> tuple[list[dict[str, Any]], int]:
    """One summary per fleet in the store (those down only with ``include_down``), and how
    many fleets that are down were left out."""
    if not store_exists(app):
        return [], 0
    store, _ = readable_store(app)
    rows, hidden = [], 0
    try:
        for record in store.list_fleets():
            if record.status == FleetStatus.DOWN and not include_down:
                hidden += 1
                continue
            try:
                data, _view = snapshot(app, store, record.name)
            except FleetError as err:
                rows.append(
                    {
                        "fleet": record.name,
                        "status": ERROR,
                        "recorded_status": record.status,
                        "backend": record.backend,
                        "running": None,
                        "planned": None,
                        "gpus": None,
                        "price_per_hour": None,
                        "cost_so_far": None,
                        "cost_basis": None,
                        "provider_errors": {},
                        "planned_per_hour": None,
                        "billed_per_hour": None,
                        "bill_read": 0,
                        "bill_planned_per_hour": None,
                        "bill_breaches": 0,
                        "savings": None,
                        "savings_fraction": None,
                        "error": str(err),
                    }
                )
                continue
            cost = data["cost"]
            rows.append(
                {
                    "fleet": data["fleet"],
                    "status": data["status"],
                    "recorded_status": data["recorded_status"],
                    "backend": data["backend"],
                    "running": data["running"],
                    "planned": data["planned"],
                    "gpus": cost["running_gpus"],
                    "price_per_hour": cost["rate_per_hour"],
                    "cost_so_far": cost["cost_so_far"],
                    "cost_basis": data["cost_basis"],
                    "provider_errors": data["provider_errors"],
                    "planned_per_hour": data["planned_per_hour"],
                    "billed_per_hour": data["billed_per_hour"],
                    "bill_read": data["bill"]["read"],
                    "bill_planned_per_hour": data["bill"]["planned_per_hour"],
                    "bill_breaches": len(data["bill"]["breaches"]),
                    "savings": cost["savings"],
                    "savings_fraction": cost["savings_fraction"],
                    "error": "",
                }
            )
    finally:
        store.close()
    return rows, hidden
