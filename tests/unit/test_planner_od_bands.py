"""A coupled job's domain bounds per band of the on-demand part (``fleet.planning.od_bands``) and
the greedy relaxations they are built from (``fleet.planning.relaxation``): valid (never above a
domain's optimum, found by the plain MILP), exact where they claim to be (the greedy equals the
LP), and tighter than one relaxation at the baseline."""

from __future__ import annotations

import random

import numpy as np
import pytest
from planner_oracle import random_offers
from scipy.optimize import linprog

from fleet.model import Market, Quota
from fleet.planning import milp, placement, relaxation, strategies
from fleet.planning.candidates import select
from fleet.planning.domain_bounds import Bounds
from fleet.planning.domains import Domains, limits_for
from fleet.spec import parse_spec


def _offers(rng: random.Random, n: int) -> list:
    """``n`` offers over 2 providers x 4 regions x 3 zones, nodes of 1 to 8 GPUs."""
    return random_offers(rng, n, regions=4, zones=3, gpus=(1, 2, 4, 8), spot_discount=0.45, max_rate=0.6)


SPEC = (
    "name: banded\ncapacity: {gpus: 24, accelerators: {H100: 1.0, A100-80GB: 0.6}, on_demand_gpus: 6}\n"
    "workload: {kind: coupled, restart_seconds: 900}\n"
    "diversification: {max_pool_share: 0.3, min_pools: 2, max_zone_share: 0.4}\nplacement: region\n"
)


def _bounds(spec, cand, quotas):
    """``Bounds`` as the planner builds them for a region placement with a zone cap."""
    limits = limits_for(spec, cand.weighted[cand.spot], quotas)
    bound = Domains.bind(limits, cand)
    share = dict(limits.shares)["zone"]
    spread = relaxation.Spread(
        bound.keys["zone"],
        max(share * (limits.target - limits.baseline), limits.floor),
        None if limits.fixed(share) else (share, limits.target, limits.floor, bound.od_node),
    )
    members, _ = placement.domains_of(cand, "region")
    rows = relaxation.QuotaRows(bound.quota_units, bound.headroom)
    return Bounds(spec, cand, members, rows, spread), members, limits


@pytest.mark.parametrize("seed", range(6))
def test_banded_bounds_never_exceed_a_domain_optimum(seed):
    rng = random.Random(seed)
    spec = parse_spec(SPEC)
    quotas = [
        Quota(provider="aws", market=Market.SPOT, limit=10),
        Quota(provider="gcp", market=Market.ON_DEMAND, limit=20),
    ]
    cand = select(spec, _offers(rng, 150))
    bounds, members, limits = _bounds(spec, cand, quotas)
    solved = 0
    for d, m in enumerate(members):
        banded = bounds.refine(d)
        sub = cand.subset(m)
        model = milp.Model(sub, 24.0, 6.0, None, 2, reduce=False, limits=limits)
        out = strategies.solve(spec.strategy, model, spec.workload, replan=False)
        if out.counts is None:
            continue
        solved += 1
        value = placement.value_of(spec, sub, out.counts, 0.0, strategies.independent_costs(sub, spec.workload))[0]
        assert banded <= value * (1 + 1e-9), (d, banded, value)
        assert banded >= bounds.first[d] * (1 - 1e-12)
    assert solved >= 2


def test_bands_tighten_the_bound_where_caps_shrink_with_on_demand():
    """Summed over seeds and domains, the banded bound is above the single relaxation at the
    baseline (the caps there are the loosest any plan has) and never below it by more than the
    difference in how the quotas are priced."""
    tighter = 0
    for seed in range(4):
        rng = random.Random(100 + seed)
        spec = parse_spec(SPEC)
        cand = select(spec, _offers(rng, 150))
        bounds, members, _ = _bounds(spec, cand, [])
        for d, m in enumerate(members):
            if not np.isfinite(bounds.first[d]):
                continue
            single = relaxation.frontier_bound(
                spec, cand, m, float(bounds.first[d]), bounds._quotas(d), bounds.nu[d], bounds._spread(d)
            )
            banded = bounds.refine(d)
            assert banded >= single * (1 - 1e-9)
            tighter += banded > single * (1 + 1e-6)
    assert tighter >= 3


def _random_cover(rng: random.Random, n: int):
    weighted = np.array([rng.choice([0.6, 1.0, 2.4, 4.0, 8.0]) for _ in range(n)])
    spot = np.array([rng.random() < 0.65 for _ in range(n)])
    upper = np.array([rng.choice([1.0, 2.0, 3.0, np.inf]) if not s else rng.choice([1.0, 2.0]) for s in spot])
    group = np.array([rng.randrange(3) if s else -1 for s in spot])
    return weighted, spot, upper, group


@pytest.mark.parametrize("seed", range(8))
def test_the_greedy_cover_with_an_on_demand_ceiling_is_the_lp(seed):
    rng = random.Random(seed)
    n = 14
    weighted, spot, upper, group = _random_cover(rng, n)
    cost = np.array([rng.uniform(0.5, 5.0) for _ in range(n)]) * weighted
    target, baseline = 12.0, 3.0
    od_most, cap = rng.choice([3.0, 6.5, 10.0, np.inf]), rng.choice([4.0, 7.0])
    spread = relaxation.Spread(group, cap)
    got = relaxation.cover_bound(cost, weighted, spot, upper, target, baseline, spread, od_most)
    rows, rhs = [-weighted, -weighted * ~spot], [-target, -baseline]
    if od_most < np.inf:
        rows.append(weighted * ~spot)
        rhs.append(od_most)
    for g in range(3):
        rows.append(weighted * (spot & (group == g)))
        rhs.append(cap)
    lp = linprog(
        cost, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=[(0, u if np.isfinite(u) else None) for u in upper]
    )
    if lp.status == 2:
        assert got == np.inf
    else:
        assert lp.status == 0
        assert got == pytest.approx(lp.fun, rel=1e-7, abs=1e-7)


@pytest.mark.parametrize("seed", range(4))
def test_cover_bounds_price_every_row_as_cover_bound_does(seed):
    rng = random.Random(seed)
    n = 30
    weighted, spot, upper, group = _random_cover(rng, n)
    costs = np.array([[rng.uniform(0.5, 5.0) for _ in range(n)] for _ in range(5)]) * weighted
    spread = relaxation.Spread(group, 6.0)
    for od_most in (np.inf, 9.0):
        many = relaxation.cover_bounds(costs, weighted, spot, upper, 20.0, 4.0, spread, od_most)
        one = [relaxation.cover_bound(c, weighted, spot, upper, 20.0, 4.0, spread, od_most) for c in costs]
        assert many == pytest.approx(one, rel=1e-12)
