"""The cost ceiling `fleet up` holds a plan to before it launches anything.

A typo (``gpus: 100000``) plans a fleet of hundreds of thousands of dollars an hour, and
``--yes`` would have launched it. The ceiling is ``--max-cost`` when given, else the spec's
``budget.max_per_hour`` (which the planner already keeps to), else ``FIRST_USE_MAX_COST``.
A plan above it is refused with one line that says its cost and the flag that allows it.
"""

from __future__ import annotations

from fleet.errors import FleetError
from fleet.model import Plan
from fleet.spec import FleetSpec

#: $/h a plan may cost without ``--max-cost`` when its spec sets no ``budget.max_per_hour``.
FIRST_USE_MAX_COST = 500.0


class CostCeilingError(FleetError):
    """The plan costs more per hour than the ceiling allows; nothing was launched."""


def ceiling(spec: FleetSpec, max_cost: float | None) -> tuple[float, str]:
    """(the ceiling in $/h, where it comes from)."""
    if max_cost is not None:
        return max_cost, "--max-cost"
    if spec.budget.max_per_hour is not None:
        return spec.budget.max_per_hour, "the spec's budget.max_per_hour"
    return FIRST_USE_MAX_COST, "the default ceiling, as the spec sets no budget.max_per_hour"


def check(plan: Plan, spec: FleetSpec, max_cost: float | None) -> None:
    """Raise ``CostCeilingError`` when ``plan`` costs more per hour than the ceiling."""
    limit, source = ceiling(spec, max_cost)
    cost = plan.totals.price_per_hour
    if cost <= limit + 1e-9:
        return
    allow = -(-cost // 1)  # whole dollars, rounded up: the smallest flag value that passes
    raise CostCeilingError(
        f"the plan for fleet {plan.fleet!r} costs ${cost:,.2f}/h, above ${limit:,.2f}/h "
        f"({source}); nothing was launched. If that is meant, pass --max-cost {allow:.0f} "
        "(or set budget.max_per_hour in the spec)"
    )
