"""``plan(spec, offers, current, blocked) -> Plan``: the cheapest diversified fleet that meets a spec.

Pure: no I/O, no clock, no randomness; the same inputs give the same plan whatever the
order of ``offers``. Steps:

1. ``fleet.planning.candidates.select`` applies every rule of the spec (accelerators, node size,
   providers, markets, regions, zones, ``blocked`` prefixes, price cap, budget) and
   records an ``Exclusion`` per rule.
2. ``fleet.planning.pruning.prune`` drops pools that provably never appear in an optimum.
3. ``fleet.planning.strategies.solve`` solves the mixed-integer program (``fleet.planning.milp``, HiGHS)
   for the spec's strategy: integer instances per pool, weighted GPUs >= target,
   on-demand weighted GPUs >= baseline, $/h <= budget, per spot pool, zone, region and
   provider at most its share of the spot part (``fleet.planning.domains`` states the rule),
   per pool at most its capacity hint, within every ``Quota``, at least ``min_pools`` spot
   pools whenever spot is used.
4. An infeasible spec gives ``Plan(feasible=False)`` with the best partial plan and a
   ``shortfall`` naming the binding limit (``fleet.planning.shortfall``).

``current`` (pool id -> instances running now) makes this a re-plan: running instances
stay where the rules still allow them and new launches cost a little extra, so
``plan(spec, offers, current=p.counts())`` returns ``p``'s counts when nothing changed.
``blocked`` holds pool-id prefixes (``aws``, ``aws/us-east-1``, a full pool id).
``quotas`` are the account's limits (``fleet.model.Quota``, from ``Provider.quotas()``).

Raises ``PlanError`` only when no offer passes the spec's rules.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Collection, Mapping, Sequence

import numpy as np

from fleet.planning import economics, heads, strategies
from fleet.planning.candidates import OVER_BUDGET, PRICE_CAP, Candidates, arrays, select
from fleet.errors import PlanError
from fleet.planning.domains import Domains, limits_for
from fleet.planning.milp import Model
from fleet.model import Allocation, Exclusion, Market, Offer, Plan, PlanTotals, Quota
from fleet.planning.pruning import prune
from fleet.planning.shortfall import partial
from fleet.spec import FleetSpec, Strategy, WorkloadKind

DOMINATED = "dominated: enough pools of the same kind are cheaper and steadier"


def plan(spec: FleetSpec, offers: Sequence[Offer], current: Mapping[str, int] | None = None,
         blocked: Collection[str] = (), quotas: Sequence[Quota] = ()) -> Plan:
    """Plan ``spec`` over ``offers``; see the module docstring. A spec with ``head:`` gets its
    head as a separate on-demand allocation (``fleet.planning.heads``) beside the workers."""
    if spec.head is not None:
        worker_offers, head_offers = heads.split(offers)
        workers = plan(spec.model_copy(update={"head": None}), worker_offers, current, blocked, quotas)
        return heads.add_head(spec, workers.model_copy(update={"spec_hash": spec.spec_hash()}),
                              head_offers, current, blocked)
    offers = list(offers)
    cand_all = select(spec, offers, current, blocked)
    if not len(cand_all):
        raise PlanError(_nothing_left(cand_all, len(offers)))
    target, baseline = float(spec.capacity.gpus), float(spec.capacity.on_demand_gpus)
    notes = list(cand_all.notes)
    min_pools = _effective_min_pools(spec, cand_all, notes)
    limits = limits_for(spec, cand_all.weighted[cand_all.spot], quotas)

    group = room = None
    if len(limits.shares) > 1 or limits.quotas:
        domains = Domains.bind(limits, cand_all)
        group, room = domains.group, domains.room()
    keep = prune(cand_all, target, max(min_pools, 1), group, room)
    cand = cand_all.subset(keep)
    exclusions = list(cand_all.exclusions)
    if len(keep) < len(cand_all):
        dropped = np.setdiff1d(np.arange(len(cand_all)), keep)
        exclusions.append(Exclusion(reason=DOMINATED, pools=len(dropped), example=cand_all.offers[dropped[0]].pool.id))

    budget = spec.budget.max_per_hour
    model = Model(cand, target, baseline, budget, min_pools, limits=limits)
    notes += model.domains.notes
    outcome = strategies.solve(spec.strategy, model, spec.workload, replan=bool(cand.current.any()))
    notes += outcome.notes
    shortfall = ""
    counts = outcome.counts
    if counts is None:
        cost = (strategies.independent_costs(model, spec.workload)
                if spec.strategy is Strategy.PRICE_CAPACITY_OPTIMIZED else cand.price)
        counts, shortfall = partial(cand, target, baseline, budget, min_pools, cost, limits)
    notes += model.domains.binding(counts)
    kept = int(np.minimum(counts, cand.current).sum())
    if cand.current.any():
        notes.append(f"keeps {kept} of {int(cand.current.sum())} instances running in allowed pools")
    alternative = on_demand_alternative(spec, cand_all)
    return Plan(
        fleet=spec.name, spec_hash=spec.spec_hash(), strategy=spec.strategy.value,
        allocations=_allocations(spec, cand, counts),
        totals=_totals(spec, cand, counts, alternative, feasible=not shortfall),
        feasible=not shortfall, shortfall=shortfall, exclusions=tuple(exclusions), notes=tuple(notes),
    )


def _effective_min_pools(spec: FleetSpec, cand: Candidates, notes: list[str]) -> int:
    wanted = spec.diversification.min_pools
    spot_pools = int(np.count_nonzero(cand.spot))
    if spot_pools and spot_pools < wanted:
        notes.append(f"min_pools {wanted} lowered to {spot_pools}: only {spot_pools} spot pool(s) are allowed")
        return spot_pools
    return wanted if spot_pools else 0


def _nothing_left(cand: Candidates, total: int) -> str:
    if total == 0:
        return "no offers to plan with: the catalog returned none for this spec's accelerators and providers"
    parts = "; ".join(f"{e.reason}: {e.pools} (e.g. {e.example})" for e in cand.exclusions)
    return (f"none of the {total} offers passes the spec's rules ({parts}); "
            "relax those rules or browse `fleet offers` for what exists")


def on_demand_alternative(spec: FleetSpec, cand: Candidates) -> float | None:
    """$/h of the cheapest all-on-demand fleet meeting the spec's target in the pools its
    placement rules allow, ignoring its budget and price cap; ``None`` if there is none."""
    priced_out = cand.rule_counts[PRICE_CAP] or cand.rule_counts[OVER_BUDGET]
    if priced_out:
        od = arrays(spec, [o for o in cand.placeable if o.pool.market is Market.ON_DEMAND], {})
    else:
        od = cand.subset(np.flatnonzero(~cand.spot))
        od = replace(od, current=np.zeros(len(od), np.int64), upper=od.hint + od.current)
    if not len(od):
        return None
    target = float(spec.capacity.gpus)
    od = od.subset(prune(od, target, 1))
    sol = Model(od, target, 0.0, None, 0).solve(od.price)
    return None if sol is None else float(od.price @ sol.counts)


def _shares(spec: FleetSpec, cand: Candidates, counts: np.ndarray) -> tuple[np.ndarray, list[float]]:
    used = np.flatnonzero(counts)
    groups = [(int(counts[i]), float(cand.price[i]), float(cand.rate[i])) for i in used]
    return used, economics.true_cost_shares(groups, spec.workload)


def _allocations(spec: FleetSpec, cand: Candidates, counts: np.ndarray) -> tuple[Allocation, ...]:
    used, shares = _shares(spec, cand, counts)
    return tuple(Allocation(offer=cand.offers[i], count=int(counts[i]),
                            weighted_gpus=float(cand.weighted[i] * counts[i]), true_cost_per_hour=share)
                 for i, share in zip(used, shares))


def _totals(spec: FleetSpec, cand: Candidates, counts: np.ndarray, alternative: float | None,
            feasible: bool) -> PlanTotals:
    used, shares = _shares(spec, cand, counts)
    weighted = float(cand.weighted @ counts)
    true_cost = float(sum(shares))
    price = float(cand.price @ counts)
    rate = float(cand.rate @ counts)
    if spec.workload.kind is WorkloadKind.COUPLED:
        interval_rate = rate
    else:   # price-weighted mean rate of the spot nodes: one interval for every node
        spot_price = float(cand.price[cand.spot] @ counts[cand.spot])
        interval_rate = float((cand.price * cand.rate) @ counts) / spot_price if spot_price > 0 else 0.0
    savings = economics.savings_fraction(true_cost, alternative) if feasible and alternative else None
    return PlanTotals(
        gpus=int(sum(cand.offers[i].gpus * int(counts[i]) for i in used)),
        weighted_gpus=weighted,
        target_weighted_gpus=float(spec.capacity.gpus),
        on_demand_weighted_gpus=float(cand.weighted[~cand.spot] @ counts[~cand.spot]),
        price_per_hour=price,
        true_cost_per_hour=true_cost,
        true_cost_per_weighted_gpu_hour=true_cost / weighted if weighted > 0 else 0.0,
        expected_interruptions_per_day=24 * rate,
        on_demand_alternative_per_hour=alternative,
        savings_fraction=savings,
        checkpoint_interval_seconds=economics.checkpoint_interval(interval_rate, spec.workload),
        pools=len(used),
    )
