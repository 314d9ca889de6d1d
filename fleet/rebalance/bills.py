"""Which instances bill more than the plan allows (pure: no I/O, no clock).

``breaches(records, limits)`` compares each alive instance's billed rate (read back from its
provider, ``InstanceRecord.billed_per_hour``) with its planned price and the spec's budget
(``Limits``: from a ``FleetSpec``'s budget, or read from a recorded spec's JSON without building
the spec, as ``fleet status`` does):

* ``rental-mismatch``: a spot pool's instance that the provider reports as rented on-demand
  (Vast rents on-demand when a bid is missing or ignored: the bill is the on-demand price);
* ``over-cap``: billed above ``budget.max_per_node``;
* ``over-plan``: billed above the planned price by more than ``budget.bill_tolerance``.

An instance whose bill was not read yet is never a breach. One breach per instance, the first
of the list above that holds. The rebalancer acts on them by ``budget.cap_action``
(``fleet.rebalance.cycle``); ``fleet status`` lists them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from fleet.budget import CAP_ACTIONS, DEFAULT_BILL_TOLERANCE, DEFAULT_CAP_ACTION
from fleet.model import Market
from fleet.state.records import InstanceRecord

EPS = 1e-9
#: The notice an instance over its bill carries into ``decide`` under ``cap_action: replace``
#: (advisory, as an AWS rebalance recommendation: replaced first, then terminated).
NOTICE = "over-bill"
#: The event each breach is recorded as (once per instance and kind).
EVENT = "bill-over-plan"


@dataclass(frozen=True)
class Limits:
    """``budget.cap_action``, ``budget.bill_tolerance`` and ``budget.max_per_node`` of a spec."""

    cap_action: str = DEFAULT_CAP_ACTION
    tolerance: float = DEFAULT_BILL_TOLERANCE
    max_per_node: float | None = None

    @classmethod
    def of(cls, spec: Mapping[str, Any] | None) -> Limits:
        """The limits of a recorded spec's JSON (validated when it was recorded); what is missing
        or not of its type reads as the default."""
        budget = spec.get("budget") if isinstance(spec, Mapping) else None
        budget = budget if isinstance(budget, Mapping) else {}

        def number(key: str) -> float | None:
            value = budget.get(key)
            return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        action = budget.get("cap_action")
        tolerance = number("bill_tolerance")
        return cls(
            cap_action=action if action in CAP_ACTIONS else DEFAULT_CAP_ACTION,
            tolerance=DEFAULT_BILL_TOLERANCE if tolerance is None else tolerance,
            max_per_node=number("max_per_node"),
        )


@dataclass(frozen=True)
class Breach:
    """One instance billed beyond what the budget allows (see the module doc for ``why``)."""

    instance_id: str
    pool: str
    why: str
    planned_per_hour: float
    billed_per_hour: float
    rental: str
    limit_per_hour: float | None

    def describe(self) -> str:
        if self.why == "rental-mismatch":
            return (
                f"{self.instance_id} was rented {self.rental} where a {self.pool.rsplit('/', 1)[1]} rental was "
                f"planned: billed ${self.billed_per_hour:.4f}/h, planned ${self.planned_per_hour:.4f}/h"
            )
        what = "the per-node cap" if self.why == "over-cap" else "its plan plus the tolerance"
        return (
            f"{self.instance_id} bills ${self.billed_per_hour:.4f}/h, above {what} "
            f"(${(self.limit_per_hour or 0):.4f}/h; planned ${self.planned_per_hour:.4f}/h)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "message": self.describe()}


def breaches(records: Iterable[InstanceRecord], budget: Limits) -> list[Breach]:
    """The alive instances of ``records`` that bill beyond ``budget`` (module doc), by instance id."""
    out = []
    for r in sorted(records, key=lambda r: r.id):
        if not r.alive or r.billed_per_hour is None:
            continue
        billed, planned = r.billed_per_hour, r.price_per_hour
        allowed = planned * (1.0 + budget.tolerance)
        if r.market == Market.SPOT.value and r.rental == Market.ON_DEMAND.value:
            why, limit = "rental-mismatch", None
        elif budget.max_per_node is not None and billed > budget.max_per_node + EPS:
            why, limit = "over-cap", budget.max_per_node
        elif billed > allowed + EPS:
            why, limit = "over-plan", allowed
        else:
            continue
        out.append(Breach(r.id, r.pool, why, planned, billed, r.rental, limit))
    return out
