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

import gc
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

import numpy as np

from fleet.errors import PlanError
from fleet.model import Allocation, Exclusion, Market, Offer, PlacementChoice, Plan, PlanTotals, Quota
from fleet.planning import economics, heads, placement, relaxation, strategies
from fleet.planning.candidates import OVER_BUDGET, PRICE_CAP, Candidates, arrays, select
from fleet.planning.domains import Domains, Limits, limits_for
from fleet.planning.milp import Model
from fleet.planning.pruning import PoolCaps, dominance_keys, prune
from fleet.planning.shortfall import partial
from fleet.spec import PLACEMENT_LEVELS, FleetSpec, Strategy, WorkloadKind

DOMINATED = "dominated: enough pools of the same kind are cheaper and steadier"
#: A placement domain is solved for plans worth less than the runner-up so far times this
#: (a hair above 1, so a domain tying the runner-up is still found and ordered by name).
CUTOFF_SLACK = 1e-7


def plan(
    spec: FleetSpec,
    offers: Sequence[Offer],
    current: Mapping[str, int] | None = None,
    blocked: Collection[str] = (),
    quotas: Sequence[Quota] = (),
) -> Plan:
    """Plan ``spec`` over ``offers``; see the module docstring. A spec with ``head:`` gets its
    head as a separate on-demand allocation (``fleet.planning.heads``) beside the workers.

    The cyclic garbage collector is paused meanwhile: reading a large catalog allocates
    hundreds of thousands of short-lived tuples, and each collection they trigger walks every
    offer object (on 100k offers that doubled the time to read them). Planning makes no
    reference cycles worth collecting early."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return _plan(spec, offers, current, blocked, quotas)
    finally:
        if paused:
            gc.enable()


def _plan(
    spec: FleetSpec,
    offers: Sequence[Offer],
    current: Mapping[str, int] | None,
    blocked: Collection[str],
    quotas: Sequence[Quota],
) -> Plan:
    if spec.head is not None:
        worker_offers, head_offers = heads.split(offers)
        workers = plan(spec.model_copy(update={"head": None}), worker_offers, current, blocked, quotas)
        return heads.add_head(
            spec, workers.model_copy(update={"spec_hash": spec.spec_hash()}), head_offers, current, blocked
        )
    offers = list(offers)
    level = spec.placement_level
    rules = _caps_under_placement(spec, level)
    cand_all = select(rules, offers, current, blocked)
    if not len(cand_all):
        raise PlanError(_nothing_left(cand_all, len(offers)))
    notes = list(cand_all.notes)
    if rules is not spec:
        notes.append(
            f"max_zone_share {spec.diversification.max_zone_share:g} does not apply under placement zone: "
            "every node shares one zone"
        )
    replan = bool(cand_all.current.any())
    limits = limits_for(rules, cand_all.weighted[cand_all.spot], quotas)
    exclusions = list(cand_all.exclusions)
    choice = None
    if level == "any":
        min_pools = _effective_min_pools(spec, [cand_all.spot], "", notes)
        solved = _solve(rules, cand_all, limits, min_pools, replan)
    else:
        members, _ = placement.domains_of(cand_all, level)
        min_pools = _effective_min_pools(spec, [cand_all.spot[m] for m in members], level, notes)
        quota_rows, spread = relaxation.NO_QUOTAS, None
        if len(limits.shares) > 1 or limits.quotas:
            bound = Domains.bind(limits, cand_all)
            quota_rows = relaxation.QuotaRows(bound.quota_units, bound.headroom)
            inner = [(lv, s) for lv, s in limits.shares if lv != "pool"]
            if inner:  # the finest cap left below the placement level
                lv, share = inner[0]
                spread = relaxation.Spread(
                    bound.keys[lv],
                    max(share * (limits.target - limits.baseline), limits.floor),
                    None if limits.fixed(share) else (share, limits.target, limits.floor, bound.od_node),
                )
        choice = placement.choose(
            rules,
            cand_all,
            level,
            lambda sub, cutoff, whole: _solve(rules, sub, limits, min_pools, replan, cutoff, whole),
            quota_rows,
            spread,
        )
        solved = choice.solved
        if choice.outside:
            exclusions.append(_outside(cand_all, choice))
    cand, counts, shortfall = solved.cand, solved.counts, solved.shortfall
    notes += solved.notes
    exclusions += solved.exclusions
    kept = int(np.minimum(counts, cand.current).sum())
    if replan:
        notes.append(f"keeps {kept} of {int(cand_all.current.sum())} instances running in allowed pools")
    alternative = on_demand_alternative(rules, cand_all)
    return Plan(
        fleet=spec.name,
        spec_hash=spec.spec_hash(),
        strategy=spec.strategy.value,
        allocations=_allocations(spec, cand, counts),
        totals=_totals(spec, cand, counts, alternative, feasible=not shortfall),
        feasible=not shortfall,
        shortfall=shortfall,
        exclusions=tuple(exclusions),
        notes=tuple(notes),
        placement=None if choice is None else _placement_choice(spec, choice, cand, counts),
    )


def _solve(
    spec: FleetSpec,
    cand_all: Candidates,
    limits: Limits,
    min_pools: int,
    replan: bool,
    cutoff: tuple[float, ...] | None = None,
    partial_plan: bool = True,
) -> placement.Solved:
    """Prune, solve the spec's strategy over ``cand_all`` and, when it is infeasible, the best
    partial plan and its shortfall (without ``partial_plan``: ``value`` ``None`` instead).
    ``cutoff``: only a plan worth less matters (a domain whose best cannot beat it may come
    back with ``value`` ``None``)."""
    target, baseline = float(spec.capacity.gpus), float(spec.capacity.on_demand_gpus)
    group = room = None
    if len(limits.shares) > 1 or limits.quotas:
        domains = Domains.bind(limits, cand_all)
        group, room = domains.group, domains.room()
    budget = spec.budget.max_per_hour
    keep = prune(
        cand_all,
        target,
        max(min_pools, 1),
        group,
        room,
        dominance_keys(cand_all, linear_cost(spec, cand_all), budget is not None),
        pool_caps(spec, limits),
    )
    cand = cand_all.subset(keep)
    exclusions = []
    if len(keep) < len(cand_all):
        dropped = np.setdiff1d(np.arange(len(cand_all)), keep)
        exclusions.append(Exclusion(reason=DOMINATED, pools=len(dropped), example=cand_all.offers[dropped[0]].pool.id))

    model = Model(cand, target, baseline, budget, min_pools, limits=limits)
    caps = model.domains
    assert caps is not None, "a model given limits binds them"
    notes = list(caps.notes)
    bound = (
        cutoff[0] * (1 + CUTOFF_SLACK)
        if cutoff is not None and spec.strategy in (Strategy.PRICE_CAPACITY_OPTIMIZED, Strategy.LOWEST_PRICE)
        else None
    )
    bounded = bound is not None
    outcome = strategies.solve(spec.strategy, model, spec.workload, replan=replan, cutoff=bound)
    notes += outcome.notes
    shortfall = ""
    counts = outcome.counts
    independent = strategies.independent_costs(model.cand, spec.workload)
    if counts is None and (bounded or not partial_plan):  # nothing here beats the cutoff, or meets the spec
        return placement.Solved(cand, np.zeros(len(cand), np.int64), "", notes, exclusions, None)
    if counts is None:
        cost = independent if spec.strategy is Strategy.PRICE_CAPACITY_OPTIMIZED else cand.price
        counts, shortfall = partial(cand, target, baseline, budget, min_pools, cost, limits)
    notes += caps.binding(counts)
    churn = strategies.launch_penalty(spec.workload) if replan else 0.0
    value = placement.value_of(spec, cand, counts, churn, independent)
    return placement.Solved(cand, counts, shortfall, notes, exclusions, value)


def pool_caps(spec: FleetSpec, limits: Limits) -> PoolCaps | None:
    """What pruning's capacity rule needs (``fleet.planning.pruning``); ``None`` for
    ``diversified``, which tightens the pools' bounds per solve."""
    if spec.strategy is Strategy.DIVERSIFIED:
        return None
    share = limits.share("pool")
    assert share is not None, "limits_for lists the pool share first, always"
    return PoolCaps(limits.target, limits.baseline, float(share), limits.floor)


def linear_cost(spec: FleetSpec, cand: Candidates) -> np.ndarray | None:
    """The cost per node of a strategy whose objective is that cost alone and whose rows read
    no rate (``fleet.planning.pruning.dominance_keys``); ``None`` for the others."""
    if spec.strategy is Strategy.LOWEST_PRICE:
        return cand.price
    if spec.strategy is Strategy.PRICE_CAPACITY_OPTIMIZED and spec.workload.kind is WorkloadKind.INDEPENDENT:
        return strategies.independent_costs(cand, spec.workload)
    return None


def _caps_under_placement(spec: FleetSpec, level: str) -> FleetSpec:
    """``spec`` with the caps at the placement level and coarser off (all nodes share one such
    domain; ``FleetSpec`` refuses such caps set explicitly, so only the default zone cap is
    dropped here); ``spec`` itself when there is none to drop."""
    if level == "any":
        return spec
    d = spec.diversification
    off = {
        f"max_{lv}_share": 1.0
        for lv in PLACEMENT_LEVELS[PLACEMENT_LEVELS.index(level) :]
        if getattr(d, f"max_{lv}_share") < 1
    }
    if not off:
        return spec
    return spec.model_copy(update={"diversification": d.model_copy(update=off)})


def _outside(cand: Candidates, choice: placement.Choice) -> Exclusion:
    labels = cand.labels()
    names = labels.names(choice.level)
    out = np.flatnonzero(names[labels.codes(choice.level)] != choice.domain)
    return Exclusion(
        reason=f"outside the chosen {choice.level} (placement)", pools=len(out), example=cand.offers[out[0]].pool.id
    )


def _placement_choice(
    spec: FleetSpec, choice: placement.Choice, cand: Candidates, counts: np.ndarray
) -> PlacementChoice:
    value = choice.solved.value
    used = [cand.offers[i].pool.provider for i in np.flatnonzero(counts)]
    interconnect = ""
    if choice.level == "zone" and spec.workload.kind is WorkloadKind.COUPLED and used:
        interconnect = placement.INTERCONNECT.get(used[0], "")
    return PlacementChoice(
        level=choice.level,
        domain=choice.domain,
        metric=placement.METRIC[spec.strategy],
        objective=value[0] if value else 0.0,
        domains=choice.domains,
        solved=choice.tried,
        runner_up=choice.runner_up,
        runner_up_objective=choice.runner_up_value[0] if choice.runner_up_value else None,
        interconnect=interconnect,
    )


def _effective_min_pools(spec: FleetSpec, spots: list[np.ndarray], level: str, notes: list[str]) -> int:
    """``min_pools``, lowered to the most spot pools one placement domain (``spots``: each
    domain's spot mask; one entry without placement) allows."""
    wanted = spec.diversification.min_pools
    spot_pools = max(int(np.count_nonzero(s)) for s in spots)
    if spot_pools and spot_pools < wanted:
        where = (
            f"one {level} allows at most {spot_pools} spot pool(s)"
            if level
            else f"only {spot_pools} spot pool(s) are allowed"
        )
        notes.append(f"min_pools {wanted} lowered to {spot_pools}: {where}")
        return spot_pools
    return wanted if spot_pools else 0


def _nothing_left(cand: Candidates, total: int) -> str:
    if total == 0:
        return "no offers to plan with: the catalog returned none for this spec's accelerators and providers"
    parts = "; ".join(f"{e.reason}: {e.pools} (e.g. {e.example})" for e in cand.exclusions)
    return (
        f"none of the {total} offers passes the spec's rules ({parts}); "
        "relax those rules or browse `fleet offers` for what exists"
    )


def on_demand_alternative(spec: FleetSpec, cand: Candidates) -> float | None:
    """$/h of the cheapest all-on-demand fleet meeting the spec's target in the pools its
    rules allow (inside one domain under a ``placement`` level), ignoring its budget and
    price cap; ``None`` if there is none."""
    priced_out = cand.rule_counts[PRICE_CAP] or cand.rule_counts[OVER_BUDGET]
    if priced_out:
        od = arrays(spec, [o for o in cand.placeable if o.pool.market is Market.ON_DEMAND], {})
    else:
        od = cand.subset(np.flatnonzero(~cand.spot))
        od = replace(od, current=np.zeros(len(od), np.int64), upper=od.hint + od.current)
    if not len(od):
        return None
    target = float(spec.capacity.gpus)
    level = spec.placement_level
    groups = [np.arange(len(od))] if level == "any" else placement.domains_of(od, level)[0]
    bounds = relaxation.grouped_cover_bounds(od.price, od.weighted, od.spot, od.upper, target, 0.0, groups)
    best = None
    for d in sorted(range(len(groups)), key=lambda k: bounds[k]):  # one domain when placed
        if not np.isfinite(bounds[d]) or (best is not None and bounds[d] >= best):
            break
        sub = od.subset(groups[d])
        sub = sub.subset(prune(sub, target, 1))
        sol = Model(sub, target, 0.0, None, 0).solve(sub.price)
        if sol is not None:
            best = min(float(sub.price @ sol.counts), best if best is not None else np.inf)
    return best


def _shares(spec: FleetSpec, cand: Candidates, counts: np.ndarray) -> tuple[np.ndarray, list[float]]:
    used = np.flatnonzero(counts)
    groups = [(int(counts[i]), float(cand.price[i]), float(cand.rate[i])) for i in used]
    return used, economics.true_cost_shares(groups, spec.workload)


def _allocations(spec: FleetSpec, cand: Candidates, counts: np.ndarray) -> tuple[Allocation, ...]:
    used, shares = _shares(spec, cand, counts)
    return tuple(
        Allocation(
            offer=cand.offers[i],
            count=int(counts[i]),
            weighted_gpus=float(cand.weighted[i] * counts[i]),
            true_cost_per_hour=share,
        )
        for i, share in zip(used, shares)
    )


def _totals(
    spec: FleetSpec, cand: Candidates, counts: np.ndarray, alternative: float | None, feasible: bool
) -> PlanTotals:
    used, shares = _shares(spec, cand, counts)
    weighted = float(cand.weighted @ counts)
    true_cost = float(sum(shares))
    price = float(cand.price @ counts)
    rate = float(cand.rate @ counts)
    if spec.workload.kind is WorkloadKind.COUPLED:
        interval_rate = rate
    else:  # price-weighted mean rate of the spot nodes: one interval for every node
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
