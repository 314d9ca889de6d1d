"""The exact reductions: dominance pruning (fleet.planning.pruning), twin merging (fleet.planning.twins) and
LP reduced-cost fixing (fleet.planning.milp) never change the optimum."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_oracle import brute_force, offer

from fleet.planning import economics, strategies
from fleet.planning.candidates import select
from fleet.planning.milp import Model
from fleet.planning.planner import linear_cost, plan
from fleet.planning.pruning import dominance_keys, pool_bound, prune
from fleet.planning.twins import find_twins
from fleet.spec import Strategy, parse_spec

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def random_offers(rng: random.Random, n: int, gpus=(1, 2, 4, 8)) -> list:
    out = []
    for i in range(n):
        spot = rng.random() < 0.75
        out.append(
            offer(
                provider=rng.choice(["aws", "gcp", "azure"]),
                region=f"r{rng.randrange(3)}",
                zone=f"z{i}",
                itype=f"t{i % 7}",
                spot=spot,
                gpus=rng.choice(gpus),
                acc=rng.choice(["H100", "A100-80GB"]),
                price=round(rng.uniform(1, 4), 1) * (1 if spot else 2),
                rate=rng.choice([0.05, 0.1, 0.2, 0.3]),
                hint=rng.choice([None, None, None, 2, 5]),
            )
        )
    return out


def spec_text(
    target: int,
    baseline: int = 0,
    strategy: str = "price-capacity-optimized",
    kind: str = "independent",
    share: float = 0.5,
    min_pools: int = 2,
    budget: str = "",
) -> str:
    """Pruning is checked over the whole catalog: ``placement: any`` (test_planner_placement
    checks placement)."""
    return (
        f"name: prune-test\ncapacity: {{gpus: {target}, accelerators: {{H100: 1.0, A100-80GB: 0.6}}, "
        f"on_demand_gpus: {baseline}}}\nstrategy: {strategy}\nworkload: {{kind: {kind}}}\nplacement: any\n"
        f"diversification: {{max_pool_share: {share}, min_pools: {min_pools}}}\n{budget}"
    )


@pytest.mark.parametrize("seed", range(4))
def test_every_dropped_pool_has_enough_dominators(seed):
    rng = random.Random(seed)
    spec = parse_spec(spec_text(target=rng.choice([8, 16, 24])))
    cand = select(spec, random_offers(rng, 400))
    keep = prune(cand, spec.capacity.gpus, 2)
    assert 0 < len(keep) < len(cand)
    dropped = np.setdiff1d(np.arange(len(cand)), keep)
    order = {i: r for r, i in enumerate(np.lexsort((np.arange(len(cand)), cand.rate, cand.price)))}
    for j in dropped:
        same = np.flatnonzero((cand.spot == cand.spot[j]) & (cand.weighted == cand.weighted[j]))
        dominators = [
            i
            for i in same
            if i != j and order[i] < order[j] and cand.price[i] <= cand.price[j] and cand.rate[i] <= cand.rate[j]
        ]  # whatever their bounds: each holds a node
        assert len(dominators) >= pool_bound(spec.capacity.gpus, float(cand.weighted[j]), 2)
        assert cand.current[j] == 0


@pytest.mark.parametrize("seed", range(4))
def test_with_one_linear_cost_a_pool_is_dropped_behind_enough_cheaper_ones(seed):
    """Independent nodes, no budget: a pool goes when K pools of its kind cost no more per node."""
    rng = random.Random(seed)
    spec = parse_spec(spec_text(target=rng.choice([8, 16, 24])))
    cand = select(spec, random_offers(rng, 400))
    cost = linear_cost(spec, cand)
    keep = prune(cand, spec.capacity.gpus, 2, keys=dominance_keys(cand, cost, budget=False))
    assert len(keep) < len(prune(cand, spec.capacity.gpus, 2))
    for j in np.setdiff1d(np.arange(len(cand)), keep):
        same = np.flatnonzero((cand.spot == cand.spot[j]) & (cand.weighted == cand.weighted[j]))
        cheaper = [i for i in same if i != j and (cost[i], i) < (cost[j], j)]
        assert len(cheaper) >= pool_bound(spec.capacity.gpus, float(cand.weighted[j]), 2)


def objective(strategy: Strategy, model: Model, counts: np.ndarray, workload) -> float:
    c = model.cand
    if strategy is Strategy.LOWEST_PRICE:
        return float(c.price @ counts)
    return economics.fleet_true_cost_per_hour(
        ((int(n), float(p), float(r)) for n, p, r in zip(counts, c.price, c.rate)), workload
    )


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    target=st.integers(4, 40),
    strategy=st.sampled_from([Strategy.PRICE_CAPACITY_OPTIMIZED, Strategy.LOWEST_PRICE]),
    kind=st.sampled_from(["independent", "coupled"]),
    budget=st.sampled_from(["", "budget: {max_per_hour: 60}\n"]),
)
def test_pruned_and_fixed_program_matches_the_plain_milp(seed, target, strategy, kind, budget):
    rng = random.Random(seed)
    spec = parse_spec(spec_text(target, baseline=target // 4, strategy=strategy.value, kind=kind, budget=budget))
    cand = select(spec, random_offers(rng, rng.randrange(60, 160)))
    if not len(cand):
        return
    args = (float(target), float(target // 4), spec.budget.max_per_hour, 2)
    full = Model(cand, *args, reduce=False)
    keys = dominance_keys(cand, linear_cost(spec, cand), spec.budget.max_per_hour is not None)
    small = Model(cand.subset(prune(cand, target, 2, keys=keys)), *args)
    a = strategies.solve(strategy, full, spec.workload, replan=False)
    b = strategies.solve(strategy, small, spec.workload, replan=False)
    assert (a.counts is None) == (b.counts is None)
    if a.counts is not None:
        assert objective(strategy, small, b.counts, spec.workload) == pytest.approx(
            objective(strategy, full, a.counts, spec.workload), rel=1e-6
        )


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    target=st.integers(1, 6),
    strategy=st.sampled_from(list(Strategy)),
    kind=st.sampled_from(["independent", "coupled"]),
    min_pools=st.integers(1, 3),
)
def test_plans_over_many_interchangeable_pools_match_exhaustive_search(seed, target, strategy, kind, min_pools):
    """Six pools of one or two kinds: pruning is active and the optimum must survive it."""
    rng = random.Random(seed)
    offers = random_offers(rng, 6, gpus=(4,))
    spec = parse_spec(spec_text(target, strategy=strategy.value, kind=kind, share=1.0, min_pools=min_pools))
    p = plan(spec, offers)
    reference = plan(spec.model_copy(update={"strategy": Strategy.PRICE_CAPACITY_OPTIMIZED}), offers)
    od_cap = (
        None
        if strategy in (Strategy.PRICE_CAPACITY_OPTIMIZED, Strategy.LOWEST_PRICE)
        else reference.totals.on_demand_weighted_gpus
    )
    pools, best = brute_force(spec, offers, od_cap=od_cap)
    assert p.feasible == (best is not None)
    if best is None:
        return
    got = _key(strategy, p)
    assert got == pytest.approx(best.key[: len(got)], rel=1e-5, abs=1e-6)


def _key(strategy: Strategy, p) -> tuple[float, ...]:
    t = p.totals
    if strategy is Strategy.LOWEST_PRICE:
        return (t.price_per_hour,)
    if strategy is Strategy.PRICE_CAPACITY_OPTIMIZED:
        return (t.true_cost_per_hour,)
    if strategy is Strategy.CAPACITY_OPTIMIZED:
        return (t.expected_interruptions_per_day / 24, t.price_per_hour)
    largest = max((a.weighted_gpus for a in p.allocations if a.offer.market.value == "spot"), default=0.0)
    return (largest, t.price_per_hour)


def test_twin_pools_share_a_column_and_are_spread_round_robin():
    offers = [offer(zone=f"z{i}", price=1.0, rate=0.1) for i in range(5)] + [offer(zone="other", price=1.5)]
    spec = parse_spec(spec_text(8, share=1.0, min_pools=1))
    cand = select(spec, offers)
    twins = find_twins(cand)
    assert twins.columns == 2 and sorted(twins.size) == [1, 5]
    column = int(np.argmax(twins.size))
    counts = twins.spread(np.where(np.arange(2) == column, 7, 0))
    members = np.flatnonzero(twins.group == column)  # ascending pool index = id order
    assert counts[members].tolist() == [2, 2, 1, 1, 1]  # round-robin, first pools first
    assert counts.sum() == 7


def test_an_lp_relaxation_without_a_bound_drops_nothing():
    """An unbounded relaxation (HiGHS status 3) gives no bound: -inf and zero reduced costs."""
    from fleet.planning.highs import Program
    from fleet.planning.milp import _Program, _relaxation

    prog = _Program(
        Program(
            c=np.array([-1.0, 2.0]),
            lb=np.zeros(2),
            ub=np.array([np.inf, 5.0]),
            integrality=np.ones(2),
            start=np.zeros(1, np.int64),
            index=np.zeros(0, np.int64),
            value=np.zeros(0),
            row_lb=np.zeros(0),
            row_ub=np.zeros(0),
        ),
        extras=0,
    )
    z, reduced = _relaxation(prog)
    assert z == -np.inf and list(reduced) == [0.0, 0.0]


def few_kinds(rng: random.Random, n: int) -> list:
    """Many pools of few kinds (two node sizes, one accelerator, one region): the capacity rule
    has work to do; zones vary so zone caps and quotas have something to bind."""
    out = []
    for i in range(n):
        spot = rng.random() < 0.7
        out.append(
            offer(
                provider=rng.choice(["aws", "gcp"]),
                region="r0",
                zone=f"z{rng.randrange(3)}",
                itype=f"t{i}",
                spot=spot,
                gpus=rng.choice([1, 2]),
                price=round(rng.uniform(1, 3), 1) * (1 if spot else 2),
                rate=rng.choice([0.05, 0.1, 0.2]),
                hint=rng.choice([None, 1, 2, 3]),
            )
        )
    return out


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    target=st.integers(2, 24),
    baseline=st.sampled_from([0, 2, 5]),
    strategy=st.sampled_from([Strategy.PRICE_CAPACITY_OPTIMIZED, Strategy.LOWEST_PRICE, Strategy.CAPACITY_OPTIMIZED]),
    kind=st.sampled_from(["independent", "coupled"]),
    share=st.sampled_from([0.25, 0.5, 1.0]),
    min_pools=st.integers(1, 3),
    zone_share=st.sampled_from([1, 0.5]),
    quota=st.booleans(),
)
def test_capacity_pruning_keeps_the_plain_milp_optimum(
    seed, target, baseline, strategy, kind, share, min_pools, zone_share, quota
):
    """Pools dropped behind dominators with room (not only unused ones) never hold the optimum:
    the plan over what pruning keeps (the planner's own path) is worth what the plain MILP over
    every allowed pool finds, under pool shares, min_pools, a baseline, zone caps and quotas."""
    from fleet.model import Quota
    from fleet.planning.domains import Domains, limits_for
    from fleet.planning.planner import pool_caps

    rng = random.Random(seed)
    baseline = min(baseline, target)
    spec = parse_spec(
        spec_text(
            target, baseline=baseline, strategy=strategy.value, kind=kind, share=share, min_pools=min_pools
        ).replace(f"min_pools: {min_pools}}}", f"min_pools: {min_pools}, max_zone_share: {zone_share}}}")
    )
    quotas = [Quota(provider="aws", limit=rng.randint(2, 10))] if quota else []
    cand = select(spec, few_kinds(rng, rng.randrange(20, 60)))
    if not len(cand):
        return
    limits = limits_for(spec, cand.weighted[cand.spot], quotas)
    domains = Domains.bind(limits, cand)
    mp = min(min_pools, int(cand.spot.sum())) if cand.spot.any() else 0
    keys = dominance_keys(cand, linear_cost(spec, cand), False)
    keep = prune(cand, target, max(mp, 1), domains.group, domains.room(), keys, pool_caps(spec, limits))
    with_count_only = prune(cand, target, max(mp, 1), domains.group, domains.room(), keys)
    assert set(keep) <= set(with_count_only)
    args = (float(target), float(baseline), None, mp)
    full = Model(cand, *args, reduce=False, limits=limits)
    small = Model(cand.subset(keep), *args, limits=limits)
    a = strategies.solve(strategy, full, spec.workload, replan=False)
    b = strategies.solve(strategy, small, spec.workload, replan=False)
    assert (a.counts is None) == (b.counts is None)
    if a.counts is not None:
        assert objective(strategy, small, b.counts, spec.workload) == pytest.approx(
            objective(strategy, full, a.counts, spec.workload), rel=1e-6, abs=1e-9
        )


def test_capacity_pruning_keeps_only_the_pools_that_can_hold_the_target():
    """One on-demand pool without a capacity hint can take every node a plan needs of its kind,
    so the dearer pools of that kind go; the count rule alone would keep ``floor(T / w) + 1``."""
    from fleet.planning.domains import limits_for
    from fleet.planning.planner import pool_caps

    offers = [offer(zone=f"z{i}", itype=f"t{i}", spot=False, price=2.0 + i / 10) for i in range(12)]
    spec = parse_spec(spec_text(8, baseline=8, min_pools=1))
    cand = select(spec, offers)
    limits = limits_for(spec, cand.weighted[cand.spot])
    assert len(prune(cand, 8, 1)) == 9
    kept = prune(cand, 8, 1, caps=pool_caps(spec, limits))
    assert [cand.offers[i].price_per_hour for i in kept] == [2.0]


def test_grouped_cover_bounds_equal_the_greedy_per_domain():
    from fleet.planning.relaxation import cover_bound, grouped_cover_bounds

    rng = np.random.default_rng(0)
    for _ in range(200):
        n, groups = int(rng.integers(1, 40)), int(rng.integers(1, 6))
        cost = rng.uniform(0.5, 5, n).round(1)
        w = rng.choice([0.6, 1.0, 2.0, 4.8], n)
        spot = rng.random(n) < 0.6
        upper = np.where(rng.random(n) < 0.5, np.inf, rng.integers(0, 5, n).astype(float))
        g = rng.integers(0, groups, n)
        members = [np.flatnonzero(g == k) for k in range(groups) if (g == k).any()]
        target = float(rng.integers(1, 30))
        baseline = float(rng.integers(0, target + 1)) if rng.random() < 0.5 else 0.0
        if rng.random() < 0.2:
            cost[rng.integers(0, n)] = np.inf  # a pool no plan can afford
        got = grouped_cover_bounds(cost, w, spot, upper, target, baseline, members)
        finite = np.where(np.isinf(cost), 1e200, cost)  # the greedy takes it only when it must
        want = [cover_bound(finite[m], w[m], spot[m], upper[m], target, baseline) for m in members]
        want = [np.inf if y >= 1e150 else y for y in want]
        for x, y in zip(got, want):
            assert x <= y and (x == y or x == pytest.approx(y, rel=1e-9)), (got, want)
