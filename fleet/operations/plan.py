"""``fleet plan SPEC``: the cheapest diversified fleet for a spec, against what runs now.

``plan_fleet`` gathers what the planner sees (``fleet.operations.offers``), what the fleet runs
now (by tag), the blocked pools and the account quotas, and calls the pure planner
(``fleet.planning.planner.plan``). Providers that cannot launch here are priced from the
snapshot and marked: the mark is also a note of the plan a face saves. ``changes`` is a plan
against what runs (what `fleet up` would launch and terminate). ``fresh_plan`` is the plan of a
fleet that runs nothing yet (``fleet export pulumi``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleet.model import Plan

if TYPE_CHECKING:  # `changes` alone (fleet status draws it) loads neither the catalog nor the providers
    from fleet.catalog import CatalogInfo
    from fleet.operations.workspace import Workspace
    from fleet.spec import FleetSpec


@dataclass(frozen=True)
class PlanOutcome:
    """A plan as made (``plan``), the same with the cannot-launch marks as notes (``saved``: what
    ``--out`` writes and ``--json`` prints), where the offers came from, and what runs now."""

    plan: Plan
    saved: Plan
    info: CatalogInfo
    current: dict[str, int]
    marks: tuple[str, ...]


def plan_fleet(spec: FleetSpec, where: Workspace) -> PlanOutcome:
    """Plan ``spec`` against what its fleet runs now; launches nothing, creates no store."""
    from fleet.operations.offers import blocked_pools, learned_rates, offers_for, providers_or_none, running_now
    from fleet.planning.planner import plan as make_plan  # the solver: imported only when planning
    from providers.base import account_quotas
    from providers.registry import cannot_launch

    blocked = cannot_launch(spec)
    providers = providers_or_none(spec, where)
    offers, info = offers_for(spec, where, providers, snapshot_for=blocked)
    offers = learned_rates(where, spec, offers, providers)
    current = running_now(providers, spec.name)
    result = make_plan(
        spec, offers, current=current, blocked=blocked_pools(where, providers), quotas=account_quotas(providers)
    )
    marks = tuple(cannot_launch_line(result, name, why) for name, why in blocked.items())
    saved = result.model_copy(update={"notes": result.notes + marks}) if marks else result
    return PlanOutcome(plan=result, saved=saved, info=info, current=current, marks=marks)


def fresh_plan(spec: FleetSpec, where: Workspace) -> Plan:
    """The plan for a fleet that does not run yet (``fleet export pulumi``: a new stack declares it
    whole): the offers the planner sees, nothing running, nothing blocked, no account quotas."""
    from fleet.operations.offers import offers_for
    from fleet.planning.planner import plan as make_plan  # the solver: imported only when planning

    offers, _info = offers_for(spec, where)
    return make_plan(spec, offers)


def cannot_launch_line(plan: Plan, provider: str, why: str) -> str:
    """The mark ``fleet plan`` puts on a provider ``fleet up`` cannot launch on (also a plan note)."""
    used = sum(a.count for a in plan.allocations if a.offer.pool.provider == provider)
    share = f", {used} instance(s) of this plan" if used else ""
    return (
        f"cannot launch here: {provider} ({why}); priced from the snapshot{share}; `fleet up` refuses this "
        "spec until it is removed from `providers:`"
    )


def changes(plan: Plan, current: Mapping[str, int]) -> dict[str, int]:
    """Pool -> instances to launch (positive) or terminate (negative) to go from ``current`` to ``plan``."""
    wanted = plan.counts()
    return {
        p: wanted.get(p, 0) - current.get(p, 0)
        for p in sorted(set(wanted) | set(current))
        if wanted.get(p, 0) != current.get(p, 0)
    }
