"""Planned against billed, for ``fleet status``, ``fleet history`` and the dashboard (pure).

``summary(alive, budget)``: over the running instances whose bill was read back
(``fleet.provisioning.billing``), what the plan priced them at and what the providers bill,
how many were read, and the instances billed beyond the budget (``fleet.rebalance.bills``).
``rows(records)``: each instance's planned and billed rate, the billed rate's source and the
rental kind the provider reported (``billed_per_hour`` ``None``: not read).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
