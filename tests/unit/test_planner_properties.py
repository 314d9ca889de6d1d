"""Property tests: on small random instances the planner keeps every rule and is optimal
(compared with exhaustive search in planner_oracle, which shares no code with the solver)."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_oracle import allowed, brute_force, cap, domain_of, offer, placement_of, share_limit, weighted

from fleet.errors import PlanError
from fleet.model import Market
from fleet.planning.planner import plan
from fleet.spec import Strategy, parse_spec

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-6


@st.composite
def offers(draw):
    out = []
    for i in range(draw(st.integers(1, 4))):
        spot = draw(st.booleans())
        out.append(
            offer(
                provider=draw(st.sampled_from(["aws", "gcp"])),
                region=draw(st.sampled_from(["r1", "r2"])),
                zone=f"z{i}",
                itype=f"t{i}",
                spot=spot,
                acc=draw(st.sampled_from(["H100", "A100-80GB"])),
                gpus=draw(st.sampled_from([1, 2, 4, 8])),
                price=draw(st.integers(5, 400)) / 20,
                rate=draw(st.integers(0, 150)) / 100,
                hint=draw(st.one_of(st.none(), st.integers(0, 4))),
            )
        )
    return out


@st.composite
def specs(draw, strategy: str | None = None):
    target = draw(st.integers(1, 8))
    baseline = draw(st.integers(0, target)) if draw(st.booleans()) else 0
    budget = draw(st.one_of(st.none(), st.integers(2, 60)))
    lines = [
        "name: prop-fleet",
        f"capacity: {{gpus: {target}, accelerators: {{H100: 1.0, A100-80GB: 0.6}}, on_demand_gpus: {baseline}}}",
        f"strategy: {strategy or draw(st.sampled_from(['price-capacity-optimized', 'lowest-price']))}",
        f"workload: {{kind: {draw(st.sampled_from(['independent', 'coupled']))}, "
        f"restart_seconds: {draw(st.sampled_from([60, 600]))}}}",
        f"diversification: {{max_pool_share: {draw(st.sampled_from([0.25, 0.5, 1.0]))}, "
        f"min_pools: {draw(st.integers(1, 3))}}}",
    ]
    if budget is not None:
        lines.append(f"budget: {{max_per_hour: {budget}}}")
    # the lexicographic strategies are compared with a market split taken over every pool
    placement = "any" if strategy in ("capacity-optimized", "diversified") else draw(PLACEMENTS)
    if placement is not None:
        lines.append(f"placement: {placement}")
    if draw(st.booleans()):
        lines.append("providers:\n  aws: {regions: [r1]}\n  gcp: {}")
    return parse_spec("\n".join(lines) + "\n")


PLACEMENTS = st.sampled_from([None, "zone", "region", "provider", "any"])
blocked_lists = st.lists(st.sampled_from(["gcp", "aws/r2", "aws/r1/z0", "gcp/r1/z1/t1/spot"]), max_size=2)


def check_rules(spec, offers_, blocked, p):
    """Invariants that hold for every plan, feasible or partial."""
    by_id = {o.pool.id: o for o in offers_}
    budget = spec.budget.max_per_hour
    if budget is not None:
        assert p.totals.price_per_hour <= budget + TOL
    limit = share_limit(spec, [o for o in offers_ if allowed(spec, o, tuple(blocked))])
    for a in p.allocations:
        o = by_id[a.offer.pool.id]
        assert allowed(spec, o, tuple(blocked)), f"{o.pool.id} breaks a rule"
        assert a.count <= cap(spec, o, limit)
        if o.pool.market is Market.SPOT:  # no pool holds more than the share (or one smallest node)
            assert a.weighted_gpus <= limit + TOL
        assert a.weighted_gpus == pytest.approx(a.count * weighted(spec, o))
    spot_pools = sum(1 for a in p.allocations if a.offer.market is Market.SPOT)
    level = placement_of(spec)
    domain = (lambda o: domain_of(o, level)) if level != "any" else (lambda o: "")
    allowed_spot = Counter(
        domain(o)
        for o in offers_
        if allowed(spec, o, tuple(blocked)) and o.pool.market is Market.SPOT and cap(spec, o, limit) > 0
    )
    assert spot_pools == 0 or spot_pools >= min(spec.diversification.min_pools, max(allowed_spot.values()))
    assert len({domain(a.offer) for a in p.allocations if a.count}) <= 1, "the plan spans two placement domains"


def solve_both(spec, offers_, blocked):
    try:
        p = plan(spec, offers_, blocked=blocked)
    except PlanError:
        assert not any(allowed(spec, o, tuple(blocked)) for o in offers_)
        return None, None
    return p, brute_force(spec, offers_, tuple(blocked))


def checked(spec, offers_, blocked):
    """Plan, check the rules and feasibility against the oracle; ``(plan, best)`` when there
    is an optimum to compare, else ``None``."""
    p, oracle = solve_both(spec, offers_, blocked)
    if p is None:
        return None
    check_rules(spec, offers_, blocked, p)
    _, best = oracle
    assert p.feasible == (best is not None), p.shortfall
    return None if best is None else (p, best)


@SETTINGS
@given(spec=specs(), offers_=offers(), blocked=blocked_lists)
def test_plans_keep_every_rule_and_are_optimal(spec, offers_, blocked):
    found = checked(spec, offers_, blocked)
    if found is None:
        return
    p, best = found
    assert p.totals.weighted_gpus >= spec.capacity.gpus - TOL
    assert p.totals.on_demand_weighted_gpus >= spec.capacity.on_demand_gpus - TOL
    got = p.totals.price_per_hour if spec.strategy.value == "lowest-price" else p.totals.true_cost_per_hour
    assert got == pytest.approx(best.key[0], rel=1e-5, abs=1e-6)


@SETTINGS
@given(spec=specs(strategy="capacity-optimized"), offers_=offers(), blocked=blocked_lists)
def test_capacity_optimized_minimises_interruptions_then_price(spec, offers_, blocked):
    split_and_compare(
        spec, offers_, blocked, lambda p: (p.totals.expected_interruptions_per_day / 24, p.totals.price_per_hour)
    )


@SETTINGS
@given(spec=specs(strategy="diversified"), offers_=offers(), blocked=blocked_lists)
def test_diversified_minimises_the_largest_spot_pool_then_price(spec, offers_, blocked):
    def key(p):
        largest = max((a.weighted_gpus for a in p.allocations if a.offer.market is Market.SPOT), default=0.0)
        return largest, p.totals.price_per_hour

    split_and_compare(spec, offers_, blocked, key)


def split_and_compare(spec, offers_, blocked, key):
    """These strategies keep the on-demand share of the price-capacity-optimized plan."""
    found = checked(spec, offers_, blocked)
    if found is None:
        return
    p, _ = found
    reference = plan(spec.model_copy(update={"strategy": Strategy.PRICE_CAPACITY_OPTIMIZED}), offers_, blocked=blocked)
    od_cap = max(reference.totals.on_demand_weighted_gpus, spec.capacity.on_demand_gpus)
    _, best = brute_force(spec, offers_, tuple(blocked), od_cap=od_cap)
    assert best is not None
    assert key(p) == pytest.approx(best.key, rel=1e-5, abs=1e-6)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs(), offers_=offers(), blocked=blocked_lists)
def test_replanning_an_unchanged_fleet_is_stable(spec, offers_, blocked):
    try:
        p = plan(spec, offers_, blocked=blocked)
    except PlanError:
        return
    again = plan(spec, offers_, current=p.counts(), blocked=blocked)
    if p.feasible:
        assert again.counts() == p.counts()
    assert math.isfinite(again.totals.true_cost_per_hour)
