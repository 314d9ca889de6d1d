"""Planned against billed, for ``fleet status``, ``fleet history`` and the dashboard (pure).

``summary(alive, budget)``: over the running instances whose bill was read back
(``fleet.provisioning.billing``), what the plan priced them at and what the providers bill,
how many were read, and the instances billed beyond the budget (``fleet.rebalance.bills``).
``rows(records)``: each instance's planned and billed rate, the billed rate's source and the
rental kind the provider reported (``billed_per_hour`` ``None``: not read).
``accrued(records, now)``: the cost so far at the billed rate of each instance whose bill was read
(from its launch: the rate read back is taken to hold for its whole run) and at the planned price
for the others, with ``cost_basis`` ``billed`` (every instance that ran was read), ``planned``
(none was) or ``mixed``, and the cost at the planned prices alone beside it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fleet.provisioning.accounting import Clock, hours_run, now_of
from fleet.rebalance.bills import Limits, breaches
from fleet.state.records import InstanceRecord


def summary(alive: list[InstanceRecord], budget: Limits) -> dict[str, Any]:
    """See the module doc; ``ratio`` is billed over planned for the instances read."""
    read = [r for r in alive if r.billed_per_hour is not None]
    planned = sum(r.price_per_hour for r in read)
    billed = sum(r.billed_per_hour or 0.0 for r in read)
    return {
        "instances": len(alive),
        "read": len(read),
        "planned_per_hour": planned if read else None,
        "billed_per_hour": billed if read else None,
        "ratio": billed / planned if read and planned > 0 else None,
        "tolerance": budget.tolerance,
        "max_per_node": budget.max_per_node,
        "cap_action": budget.cap_action,
        "breaches": [b.to_dict() for b in breaches(alive, budget)],
    }


def row(record: InstanceRecord) -> dict[str, Any]:
    """One instance's planned and billed rate (see the module doc)."""
    return {
        "planned_per_hour": record.price_per_hour,
        "billed_per_hour": record.billed_per_hour,
        "billed_source": record.billed_source,
        "rental": record.rental,
    }


def rows(records: Iterable[InstanceRecord]) -> list[dict[str, Any]]:
    """Every instance of ``records`` (alive or ended) with its id, pool, market and :func:`row`."""
    return [{"id": r.id, "pool": r.pool, "market": r.market, "alive": r.alive, **row(r)} for r in records]


def accrued(records: Iterable[InstanceRecord], now: Clock) -> dict[str, Any]:
    """``{"cost_so_far", "planned_cost_so_far", "cost_basis"}`` of ``records`` (see the module doc);
    an instance that has not run yet (no hours) does not weigh on the basis; no hours at all:
    ``planned``."""
    billed_cost = planned_cost = 0.0
    read = unread = 0
    for r in records:
        hours = hours_run(r, now_of(now, r.provider))
        planned_cost += r.price_per_hour * hours
        if r.billed_per_hour is None:
            billed_cost += r.price_per_hour * hours
            unread += hours > 0
        else:
            billed_cost += r.billed_per_hour * hours
            read += hours > 0
    basis = "mixed" if read and unread else "billed" if read else "planned"
    # to a millionth of a dollar: sums over the same instances in another order agree exactly
    return {"cost_so_far": round(billed_cost, 6), "planned_cost_so_far": round(planned_cost, 6), "cost_basis": basis}
