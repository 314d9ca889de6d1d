"""Failure-domain caps (zone, region, provider), the share rule and account quotas:
exact against exhaustive search (planner_oracle) and the plain MILP, and named when they bind."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_oracle import brute_force, domain_of, offer

from fleet.catalog import snapshot_offers
from fleet.model import Market, Quota, QuotaUnit
from fleet.planning import economics, plan, strategies
from fleet.planning.candidates import select
from fleet.planning.domains import Domains, limits_for
from fleet.planning.milp import FIXING_MIN_POOLS, Model
from fleet.planning.pruning import prune
from fleet.spec import parse_spec

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-6


def spec_of(div: str, gpus: int = 8, on_demand: int = 0, extra: str = "") -> object:
    """A spec with ``div`` as its caps; ``placement: any`` so coupled jobs, too, may span the
    zones, regions and providers those caps spread them over (``test_planner_placement``)."""
    return parse_spec(
        f"name: dom\ncapacity: {{gpus: {gpus}, accelerators: {{H100: 1.0, A100-80GB: 0.6}}, "
        f"on_demand_gpus: {on_demand}}}\ndiversification: {{{div}}}\nplacement: any\n{extra}"
    )


def largest_share(p, level: str) -> float:
    loads: dict[str, float] = {}
    for a in p.allocations:
        if a.offer.market is Market.SPOT:
            loads[domain_of(a.offer, level)] = loads.get(domain_of(a.offer, level), 0.0) + a.weighted_gpus
    spot = sum(loads.values())
    return max(loads.values()) / spot if spot else 0.0


# ---- the caps ----------------------------------------------------------------------------


def test_zone_cap_spreads_spot_over_zones():
    # four cheap instance types in zone a, dearer ones in b, c, d: the pool cap alone packs zone a
    offers = [offer(zone="a", itype=f"t{i}", price=1.0) for i in range(4)]
    offers += [offer(zone=z, itype="u", price=2.0) for z in "bcd"]
    loose = plan(spec_of("max_pool_share: 0.25, max_zone_share: 1", gpus=8), offers)
    assert largest_share(loose, "zone") == 1.0
    p = plan(spec_of("max_pool_share: 0.25, max_zone_share: 0.25", gpus=8), offers)
    assert p.feasible and largest_share(p, "zone") <= 0.25 + TOL
    assert any(n.startswith("max_zone_share 0.25 binds in 4 zone(s) (e.g. aws/r1/a holds 2 of 2") for n in p.notes)
    default = plan(spec_of("max_pool_share: 0.25", gpus=8), offers)  # max_zone_share 0.5 by default
    assert largest_share(default, "zone") == 0.5


def test_region_and_provider_caps():
    offers = [
        offer(provider=pv, region=r, zone=f"{r}a", itype="t", price=pr)
        for pv, r, pr in [("aws", "r1", 1.0), ("aws", "r2", 1.1), ("gcp", "g1", 3.0), ("gcp", "g2", 3.1)]
    ]
    p = plan(spec_of("max_pool_share: 1.0, max_region_share: 0.5", gpus=8), offers)
    assert largest_share(p, "region") <= 0.5 + TOL and {a.offer.pool.provider for a in p.allocations} == {"aws"}
    p = plan(spec_of("max_pool_share: 1.0, max_provider_share: 0.5", gpus=8), offers)
    assert largest_share(p, "provider") == pytest.approx(0.5)


def test_share_is_of_the_spot_part_the_plan_holds():
    # on-demand is cheaper than the second spot pool, so the plan buys 6 on-demand GPUs past
    # the baseline of 2; the spot part is then 8 - 6 = 2 and each spot pool holds at most 1
    offers = [
        offer(zone="a", price=1.0, rate=0.0),
        offer(zone="b", price=5.0, rate=0.0),
        offer(zone="c", spot=False, price=1.5),
    ]
    spec = spec_of("max_pool_share: 0.5", gpus=8, on_demand=2, extra="strategy: lowest-price")
    p = plan(spec, offers)
    od = p.totals.on_demand_weighted_gpus
    for a in p.allocations:
        if a.offer.market is Market.SPOT:
            assert a.weighted_gpus <= max(0.5 * (8 - od), 1.0) + TOL
    _, best = brute_force(spec, offers)
    assert p.totals.price_per_hour == pytest.approx(best.key[0])


def test_one_node_always_fits_a_cap():
    p = plan(spec_of("max_pool_share: 1.0, max_zone_share: 0.1", gpus=8), [offer(zone=z, gpus=1) for z in "ab"])
    assert not p.feasible
    assert p.shortfall.startswith(
        "max_zone_share 0.1 allows 2 of 8 weighted GPUs; raise diversification.max_zone_share"
    )


def test_a_node_bigger_than_any_zone_may_hold_is_excluded_and_named():
    offers = [offer(zone="a", gpus=1), offer(zone="b", gpus=8, itype="big")]
    p = plan(spec_of("max_pool_share: 1.0, max_zone_share: 0.5", gpus=8), offers)
    assert [e.reason for e in p.exclusions] == ["one node exceeds diversification.max_zone_share of the spot part"]


def test_dominance_across_zones_is_not_used_when_zones_are_capped():
    """Pools in zone a dominate the dearer pool in zone b (same kind, cheaper, steadier);
    with a zone cap b is still needed, so pruning keeps it (grouped by zone) while the
    ungrouped pruning would drop it."""
    offers = [offer(zone="a", itype=f"t{i}", price=1.0, rate=0.05, hint=1) for i in range(12)]
    offers.append(offer(zone="b", itype="u", price=3.0, rate=0.5, hint=1))
    spec = spec_of("max_pool_share: 1.0, min_pools: 1, max_zone_share: 0.9", gpus=10)
    cand = select(spec, offers)
    limits = limits_for(spec, cand.weighted[cand.spot])
    group = Domains.bind(limits, cand).group
    b = next(i for i, o in enumerate(cand.offers) if o.pool.zone == "b")
    assert b not in prune(cand, 10, 1)  # across zones it is dominated ...
    assert b in prune(cand, 10, 1, group)  # ... within its zone it is not
    p = plan(spec, offers)
    _, best = brute_force(spec, offers)
    assert p.feasible and p.totals.true_cost_per_hour == pytest.approx(best.key[0])
    assert any(a.offer.pool.zone == "b" for a in p.allocations)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    kind=st.sampled_from(["independent", "coupled"]),
    zone_share=st.sampled_from([0.2, 0.34]),
)
def test_caps_found_by_restricted_programs_keep_the_plain_milp_optimum(seed, kind, zone_share):
    """Above ``FIXING_MIN_POOLS`` columns the reduced model solves restricted programs first;
    the caps their plans break become rows before the full program is solved. Many cheap
    pools in few zones make those plans break zone caps; the optimum is the plain MILP's."""
    rng = random.Random(seed)
    offers = [
        offer(
            provider=rng.choice(["aws", "gcp"]),
            region=f"r{rng.randrange(2)}",
            zone=f"z{rng.randrange(4)}",
            itype=f"t{i}",
            spot=rng.random() < 0.8,
            gpus=rng.choice([1, 2, 4]),
            price=round(rng.uniform(1, 4), 2),
            rate=rng.choice([0.05, 0.1, 0.2, 0.4]),
            hint=rng.choice([None, 2, 3]),
        )
        for i in range(90)
    ]
    spec = spec_of(
        f"max_pool_share: 0.3, min_pools: 2, max_zone_share: {zone_share}, max_region_share: 0.6",
        gpus=16,
        on_demand=2,
        extra=f"workload: {{kind: {kind}}}",
    )
    cand = select(spec, offers)
    limits = limits_for(spec, cand.weighted[cand.spot])
    fast = Model(cand, 16.0, 2.0, None, 2, limits=limits)
    plain = Model(cand, 16.0, 2.0, None, 2, reduce=False, limits=limits)
    assert fast.cols > FIXING_MIN_POOLS
    a = strategies.solve(spec.strategy, fast, spec.workload, replan=False)
    b = strategies.solve(spec.strategy, plain, spec.workload, replan=False)
    assert (a.counts is None) == (b.counts is None)
    if a.counts is None:
        return
    assert not fast.domains.broken(a.counts)

    def value(model, counts):
        return economics.fleet_true_cost_per_hour(
            ((int(n), float(p), float(r)) for n, p, r in zip(counts, model.cand.price, model.cand.rate)), spec.workload
        )

    assert value(fast, a.counts) == pytest.approx(value(plain, b.counts), rel=1e-6)


# ---- quotas ------------------------------------------------------------------------------


def test_quota_limits_gpus_and_the_shortfall_names_it():
    offers = [offer(provider="gcp", region="r1", zone=z, itype="a3", gpus=8, price=8.0) for z in "abc"]
    quota = Quota(
        provider="gcp",
        region="r1",
        market=Market.SPOT,
        accelerator="H100",
        limit=24,
        in_use=8,
        name="PREEMPTIBLE_NVIDIA_H100_GPUS",
    )
    spec = spec_of("max_pool_share: 1.0", gpus=24)
    p = plan(spec, offers, quotas=[quota])
    assert not p.feasible and p.totals.gpus == 16
    assert p.shortfall == (
        "quota gcp/r1 spot H100 GPUs (PREEMPTIBLE_NVIDIA_H100_GPUS) allows 16 of 24 weighted "
        "GPUs (limit 24, 8 in use); ask gcp to raise it"
    )
    assert plan(spec, offers, quotas=[quota.model_copy(update={"in_use": 0})]).feasible


def test_vcpu_quota_by_instance_family_and_running_instances_count_back():
    offers = [
        offer(provider="aws", region="r1", zone="a", itype="p5.48xlarge", gpus=8, price=10.0),
        offer(provider="aws", region="r1", zone="b", itype="g6.xlarge", gpus=1, acc="A100-80GB", price=4.0),
    ]
    offers = [o.model_copy(update={"vcpus": 192.0 if o.gpus == 8 else 4.0}) for o in offers]
    quota = Quota(
        provider="aws",
        region="r1",
        market=Market.SPOT,
        instance_types=("p*",),
        unit=QuotaUnit.VCPUS,
        limit=192,
        in_use=192,
        name="L-7212CCBC",
    )
    spec = spec_of("max_pool_share: 1.0, max_zone_share: 1", gpus=8)
    p = plan(spec, offers, quotas=[quota])
    assert {a.offer.pool.instance_type for a in p.allocations} == {"g6.xlarge"}
    # the 192 vCPUs in use are this fleet's own p5 node: it may keep it
    p = plan(spec, offers, current={offers[0].pool.id: 1}, quotas=[quota])
    assert p.counts() == {offers[0].pool.id: 1}
    assert any(n.startswith("quota aws/r1 spot p* vCPUs (L-7212CCBC) binds") for n in p.notes)


# ---- exactness ---------------------------------------------------------------------------


@st.composite
def instances(draw):
    pools = []
    for i in range(draw(st.integers(1, 4))):
        provider = draw(st.sampled_from(["aws", "gcp"]))
        region = draw(st.sampled_from(["r1", "r2"]))
        pools.append(
            offer(
                provider=provider,
                region=region,
                zone=draw(st.sampled_from(["a", "b"])),
                itype=f"t{i}",
                spot=draw(st.booleans()) or draw(st.booleans()),
                gpus=draw(st.sampled_from([1, 2, 4])),
                price=draw(st.integers(5, 200)) / 20,
                rate=draw(st.integers(0, 150)) / 100,
                hint=draw(st.one_of(st.none(), st.integers(0, 4))),
            )
        )
    target = draw(st.integers(1, 8))
    shares = {
        k: draw(st.sampled_from(v))
        for k, v in {
            "max_pool_share": [0.5, 1.0],
            "max_zone_share": [0.34, 0.5, 1.0],
            "max_region_share": [0.5, 0.75, 1.0],
            "max_provider_share": [0.5, 1.0],
        }.items()
    }
    div = ", ".join(f"{k}: {v}" for k, v in shares.items()) + f", min_pools: {draw(st.integers(1, 2))}"
    extra = (
        f"strategy: {draw(st.sampled_from(['price-capacity-optimized', 'lowest-price']))}\n"
        f"workload: {{kind: {draw(st.sampled_from(['independent', 'coupled']))}}}\n"
    )
    spec = spec_of(div, gpus=target, on_demand=draw(st.integers(0, target)) if draw(st.booleans()) else 0, extra=extra)
    quotas = []
    if draw(st.booleans()):
        quotas.append(
            Quota(
                provider="aws",
                region=draw(st.sampled_from(["", "r1"])),
                market=draw(st.sampled_from([None, Market.SPOT])),
                limit=draw(st.integers(0, 8)),
                in_use=draw(st.integers(0, 2)),
            )
        )
    return spec, pools, quotas


def test_a_quota_over_zones_counts_only_the_pools_in_those_zones():
    # the rebalancer's hedge caps zones that failed together this way (fleet.rebalance.hedge)
    offers = [offer(zone=z, price=p) for z, p in zip("abcd", (1.0, 1.1, 1.2, 1.3))]
    group = Quota(provider="aws", market=Market.SPOT, limit=1, in_use=0, zones=("aws/r1/a", "aws/r1/b"))
    assert [group.covers(o) for o in offers] == [True, True, False, False]
    spec = spec_of("max_pool_share: 1.0, max_zone_share: 1", gpus=4)
    p = plan(spec, offers, quotas=[group])
    counts = {a.offer.pool.zone: a.count for a in p.allocations}
    assert counts.get("a", 0) + counts.get("b", 0) == 1 and sum(counts.values()) == 4
    _, best = brute_force(spec, offers, quotas=[group])
    assert best is not None and p.totals.true_cost_per_hour == pytest.approx(best.key[0], rel=1e-5)


@SETTINGS
@given(case=instances())
def test_caps_and_quotas_match_exhaustive_search(case):
    spec, pools, quotas = case
    if not any(o.capacity_hint != 0 for o in pools):
        return
    p = plan(spec, pools, quotas=quotas)
    _, best = brute_force(spec, pools, quotas=quotas)
    assert p.feasible == (best is not None), p.shortfall
    if best is None:
        return
    got = p.totals.price_per_hour if spec.strategy.value == "lowest-price" else p.totals.true_cost_per_hour
    assert got == pytest.approx(best.key[0], rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("kind", ["independent", "coupled"])
def test_caps_and_quotas_match_the_plain_milp_on_the_catalog(kind):
    # the plain MILP of a coupled plan walks many MILPs: a slice of the catalog keeps it short
    offers = [
        o
        for o in snapshot_offers()
        if o.accelerator == "H100" and (kind == "independent" or o.pool.provider in ("aws", "gcp"))
    ]
    spec = spec_of(
        "max_pool_share: 0.15, min_pools: 3, max_zone_share: 0.25, max_region_share: 0.5, max_provider_share: 0.6",
        gpus=32,
        on_demand=4,
        extra=f"workload: {{kind: {kind}}}",
    )
    quotas = [Quota(provider="aws", market=Market.SPOT, accelerator="H100", limit=8)]
    p = plan(spec, offers, quotas=quotas)
    cand = select(spec, offers)
    limits = limits_for(spec, cand.weighted[cand.spot], quotas)
    model = Model(cand, 32.0, 4.0, None, 3, reduce=False, limits=limits)
    out = strategies.solve(spec.strategy, model, spec.workload, replan=False)
    assert p.feasible and out.counts is not None
    plain = float(cand.price @ out.counts)
    if kind == "independent":
        expected = float(strategies.independent_costs(model.cand, spec.workload) @ out.counts)
    else:
        expected = plain * economics.overhead_factor(float(cand.rate @ out.counts), spec.workload)
    assert p.totals.true_cost_per_hour == pytest.approx(expected, rel=1e-6)
    spot_part = 32 - p.totals.on_demand_weighted_gpus
    for level, share in (("zone", 0.25), ("region", 0.5), ("provider", 0.6)):
        loads: dict[str, float] = {}
        for a in p.allocations:
            if a.offer.market is Market.SPOT:
                loads[domain_of(a.offer, level)] = loads.get(domain_of(a.offer, level), 0.0) + a.weighted_gpus
        assert max(loads.values(), default=0.0) <= max(share * spot_part, 1.0) + TOL
    assert (
        sum(
            a.offer.gpus * a.count
            for a in p.allocations
            if a.offer.pool.provider == "aws" and a.offer.market is Market.SPOT and a.offer.accelerator == "H100"
        )
        <= 8
    )
