"""fleet.planning.planner.plan on hand-built offers: rules, exclusions, strategies, shortfalls, re-plans."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from planner_oracle import offer

from fleet.errors import PlanError
from fleet.model import Market, Plan
from fleet.planning import economics
from fleet.planning.planner import plan
from fleet.spec import parse_spec


def spec_of(text: str = "", *, gpus: int = 8, accelerators: str = "[H100]", on_demand: int = 0):
    return parse_spec(
        f"name: test-fleet\ncapacity: {{gpus: {gpus}, accelerators: {accelerators}, "
        f"on_demand_gpus: {on_demand}}}\n{text}"
    )


def counts(p: Plan) -> dict[str, int]:
    return p.counts()


# ---- choosing pools -------------------------------------------------------------------


def test_cheapest_true_cost_pool_wins_and_totals_add_up():
    offers = [
        offer(zone="a", price=2.0, rate=0.05),
        offer(zone="b", price=1.9, rate=2.0),
        offer(zone="c", spot=False, price=4.0),
    ]
    p = plan(spec_of("diversification: {max_pool_share: 1.0, max_zone_share: 1.0}"), offers)
    assert p.feasible and counts(p) == {"aws/r1/a/t/spot": 8}
    t = p.totals
    assert t.gpus == 8 and t.weighted_gpus == 8 and t.pools == 1
    assert t.price_per_hour == pytest.approx(16.0)
    assert t.expected_interruptions_per_day == pytest.approx(24 * 8 * 0.05)
    assert t.true_cost_per_hour == pytest.approx(16.0 * economics.overhead_factor(0.05, p_spec_workload()))
    assert t.true_cost_per_weighted_gpu_hour == pytest.approx(t.true_cost_per_hour / 8)
    assert t.on_demand_alternative_per_hour == pytest.approx(32.0)
    assert t.savings_fraction == pytest.approx(1 - t.true_cost_per_hour / 32.0)
    assert t.checkpoint_interval_seconds == pytest.approx(economics.checkpoint_interval(0.05, p_spec_workload()))
    assert sum(a.true_cost_per_hour for a in p.allocations) == pytest.approx(t.true_cost_per_hour)


def p_spec_workload():
    return spec_of().workload


def test_lowest_price_ignores_interruptions():
    offers = [offer(zone="a", price=2.0, rate=0.05), offer(zone="b", price=1.9, rate=2.0)]
    p = plan(spec_of("strategy: lowest-price\ndiversification: {max_pool_share: 1.0, max_zone_share: 1.0}"), offers)
    assert counts(p) == {"aws/r1/b/t/spot": 8}


def test_capacity_optimized_prefers_the_steadiest_pools_at_any_price():
    offers = [
        offer(zone="a", price=1.0, rate=0.3),
        offer(zone="b", price=3.0, rate=0.01, gpus=8),
        offer(zone="c", price=2.0, rate=0.01),
    ]
    p = plan(
        spec_of("strategy: capacity-optimized\ndiversification: {max_pool_share: 1.0, max_zone_share: 1.0}"), offers
    )
    # one 8-GPU node interrupted 0.01/h beats eight 1-GPU nodes at 0.01/h each
    assert counts(p) == {"aws/r1/b/t/spot": 1}


def test_diversified_spreads_spot_over_as_many_pools_as_allowed():
    offers = [offer(zone=z, price=1.0 + i / 10, rate=0.1) for i, z in enumerate("abcdefgh")]
    offers.append(offer(zone="big", price=4.0, gpus=8, rate=0.1))
    p = plan(spec_of("strategy: diversified\ndiversification: {max_pool_share: 1.0, max_zone_share: 1.0}"), offers)
    assert len(p.allocations) == 8 and all(a.count == 1 for a in p.allocations)


def test_coupled_job_prefers_fewer_steadier_nodes():
    offers = [offer(zone="small", gpus=1, price=1.0, rate=0.4), offer(zone="big", gpus=8, price=9.0, rate=0.1)]
    base = "diversification: {max_pool_share: 1.0, max_zone_share: 1.0}\nworkload: {kind: %s, restart_seconds: 600}"
    independent = plan(spec_of(base % "independent", gpus=32), offers)
    coupled = plan(spec_of(base % "coupled", gpus=32), offers)
    assert counts(independent) == {"aws/r1/small/t/spot": 32}
    assert counts(coupled) == {"aws/r1/big/t/spot": 4}
    assert coupled.totals.expected_interruptions_per_day < independent.totals.expected_interruptions_per_day


def test_on_demand_baseline_comes_from_on_demand_pools():
    offers = [offer(zone="a", price=1.0), offer(zone="b", price=1.0), offer(zone="od", spot=False, price=3.0, gpus=2)]
    p = plan(spec_of(on_demand=4), offers)
    assert counts(p)["aws/r1/od/t/on-demand"] == 2
    assert p.totals.on_demand_weighted_gpus == 4 and p.totals.weighted_gpus >= 8


def test_weights_count_throughput():
    offers = [
        offer(zone="a", acc="A100-80GB", gpus=8, price=8.0, rate=0.1),
        offer(zone="b", acc="H200", gpus=8, price=20.0, rate=0.1),
    ]
    p = plan(
        spec_of(
            "diversification: {max_pool_share: 1.0, max_zone_share: 1.0}",
            gpus=16,
            accelerators="{H200: 1.3, A100-80GB: 0.6}",
        ),
        offers,
    )
    # 4 A100 nodes (19.2 weighted) would exceed the whole spot part (16) in one pool, so at
    # most 3; 2 x 4.8 + 1 x 10.4 = 20 for $36/h beats 3 x 4.8 + 10.4 for $44/h
    assert counts(p) == {"aws/r1/a/t/spot": 2, "aws/r1/b/t/spot": 1}
    assert p.totals.weighted_gpus == pytest.approx(20.0) and p.totals.gpus == 24


# ---- diversification -------------------------------------------------------------------


def test_no_spot_pool_holds_more_than_its_share():
    offers = [offer(zone=z, price=1.0 + i / 100, rate=0.1) for i, z in enumerate("abcd")]
    p = plan(spec_of("diversification: {max_pool_share: 0.25}", gpus=16), offers)
    assert sorted(counts(p).values()) == [4, 4, 4, 4]


def test_share_never_caps_below_one_node():
    offers = [offer(zone="a", gpus=8, price=8.0), offer(zone="b", gpus=8, price=9.0)]
    p = plan(spec_of("diversification: {max_pool_share: 0.1}", gpus=16), offers)
    assert counts(p) == {"aws/r1/a/t/spot": 1, "aws/r1/b/t/spot": 1}


def test_min_pools_forces_a_second_pool_when_spot_is_used():
    offers = [offer(zone="a", price=1.0), offer(zone="b", price=1.5)]
    p = plan(spec_of("diversification: {max_pool_share: 1.0, max_zone_share: 1.0, min_pools: 2}"), offers)
    assert set(counts(p)) == {"aws/r1/a/t/spot", "aws/r1/b/t/spot"}


def test_min_pools_is_lowered_when_fewer_spot_pools_exist():
    p = plan(spec_of("diversification: {max_pool_share: 1.0, max_zone_share: 1.0, min_pools: 3}"), [offer(zone="a")])
    assert p.feasible and counts(p) == {"aws/r1/a/t/spot": 8}
    assert any("min_pools 3 lowered to 1" in n for n in p.notes)


def test_capacity_hint_bounds_a_pool_and_zero_excludes_it():
    offers = [offer(zone="a", price=1.0, hint=3), offer(zone="b", price=2.0), offer(zone="c", price=0.5, hint=0)]
    p = plan(spec_of("diversification: {max_pool_share: 1.0, max_zone_share: 1.0}"), offers)
    assert counts(p) == {"aws/r1/a/t/spot": 3, "aws/r1/b/t/spot": 5}
    assert any(e.reason == "capacity hint is 0" and e.example == "aws/r1/c/t/spot" for e in p.exclusions)


# ---- rules and exclusions ----------------------------------------------------------------


def test_every_rule_is_applied_and_reported():
    spec = spec_of("""providers:
  aws: {regions: [r1], exclude_zones: [bad]}
  gcp: {spot: false}
budget: {max_per_gpu_hour: 3.0}
diversification: {max_pool_share: 1.0, max_zone_share: 1.0}
""")
    offers = [
        offer(zone="ok", price=1.0),
        offer(zone="ok2", acc="T4", price=0.1),  # accelerator
        offer(zone="ok3", gpus=16, price=1.0),  # node size
        offer(provider="azure", price=0.1),  # provider not listed
        offer(provider="gcp", price=0.1),  # market disabled
        offer(region="r2", price=0.1),  # region
        offer(zone="bad", price=0.1),  # zone
        offer(zone="pricey", price=3.5),  # price cap
    ]
    p = plan(spec, offers)
    reasons = {e.reason: (e.pools, e.example) for e in p.exclusions}
    assert counts(p) == {"aws/r1/ok/t/spot": 8}
    assert reasons["accelerator not accepted"] == (1, "aws/r1/ok2/t/spot")
    assert reasons["GPUs per node outside gpus_per_node"] == (1, "aws/r1/ok3/t/spot")
    assert reasons["provider not enabled"] == (1, "azure/r1/z1/t/spot")
    assert reasons["market disabled for provider"] == (1, "gcp/r1/z1/t/spot")
    assert reasons["region not allowed"] == (1, "aws/r2/z1/t/spot")
    assert reasons["zone not allowed"] == (1, "aws/r1/bad/t/spot")
    assert reasons["over budget.max_per_gpu_hour"] == (1, "aws/r1/pricey/t/spot")


@pytest.mark.parametrize("prefix", ["aws", "aws/r1", "aws/r1/a", "aws/r1/a/t/spot"])
def test_blocked_prefixes_remove_pools(prefix):
    offers = [offer(zone="a", price=1.0), offer(provider="gcp", zone="g", price=2.0)]
    p = plan(spec_of("diversification: {max_pool_share: 1.0, max_zone_share: 1.0}"), offers, blocked=[prefix])
    assert "aws/r1/a/t/spot" not in counts(p)
    assert any(e.reason.startswith("blocked") for e in p.exclusions)


def test_blocked_prefix_matches_whole_path_segments_only():
    offers = [offer(region="r1", zone="a"), offer(region="r10", zone="b", price=5.0)]
    p = plan(spec_of("diversification: {max_pool_share: 1.0, max_zone_share: 1.0}"), offers, blocked=["aws/r1"])
    assert counts(p) == {"aws/r10/b/t/spot": 8}


def test_no_offers_at_all_is_a_plan_error():
    with pytest.raises(PlanError, match="no offers"):
        plan(spec_of(), [])


def test_error_names_the_filters_that_removed_everything():
    offers = [offer(acc="T4"), offer(region="r9")]
    with pytest.raises(PlanError) as err:
        plan(spec_of("providers:\n  aws: {regions: [r1]}"), offers)
    assert "accelerator not accepted: 1" in str(err.value) and "region not allowed: 1" in str(err.value)


def test_result_does_not_depend_on_offer_order():
    rng = random.Random(7)
    offers = [
        offer(
            zone=f"z{i}",
            price=round(rng.uniform(1, 3), 2),
            rate=round(rng.uniform(0.01, 0.5), 3),
            gpus=rng.choice([1, 2, 4]),
        )
        for i in range(30)
    ]
    offers += [offer(zone=f"o{i}", spot=False, price=round(rng.uniform(3, 5), 2)) for i in range(5)]
    spec = spec_of("diversification: {max_pool_share: 0.3, min_pools: 3}", gpus=24, on_demand=4)
    first = plan(spec, offers)
    shuffled = offers[:]
    rng.shuffle(shuffled)
    assert plan(spec, shuffled) == first


# ---- infeasible specs ------------------------------------------------------------------


def test_budget_shortfall_names_the_budget_and_the_gap():
    offers = [offer(zone=z, price=2.0) for z in "abcd"]
    p = plan(
        spec_of("budget: {max_per_hour: 54}\ndiversification: {max_pool_share: 1.0, max_zone_share: 1.0}", gpus=32),
        offers,
    )
    assert not p.feasible
    assert p.shortfall.startswith("budget $54.00/h allows 27 of 32 weighted GPUs")
    assert "needs $64.00/h" in p.shortfall
    assert p.totals.weighted_gpus == 27 and p.totals.price_per_hour <= 54
    assert p.totals.savings_fraction is None


def test_budget_shortfall_rounds_the_need_up_so_it_never_equals_the_failing_budget():
    # 32 GPUs at $3.223875/h cost $103.164/h: to the nearest cent that is the budget itself
    offers = [offer(zone=z, price=3.223875) for z in "abcd"]
    p = plan(
        spec_of("budget: {max_per_hour: 103.16}\ndiversification: {max_pool_share: 1.0, max_zone_share: 1.0}", gpus=32),
        offers,
    )
    assert not p.feasible and p.shortfall.startswith("budget $103.16/h allows ")
    assert p.shortfall.endswith("needs $103.17/h")


def test_missing_on_demand_offer_for_the_baseline():
    p = plan(spec_of(on_demand=2), [offer(zone="a"), offer(zone="b")])
    assert not p.feasible and p.shortfall.startswith("no on-demand offer for the baseline of 2")
    # best partial plan: two spot pools, each capped at half of the 6-GPU spot part
    assert p.totals.weighted_gpus == 6 and p.totals.on_demand_weighted_gpus == 0


def test_pool_share_shortfall():
    offers = [offer(zone="a", gpus=8), offer(zone="b", gpus=8)]
    p = plan(spec_of("diversification: {max_pool_share: 0.25}", gpus=64), offers)
    assert not p.feasible and p.shortfall.startswith("max_pool_share 0.25 over 2 allowed spot pool(s) allows 32 of 64")


def test_capacity_hint_shortfall():
    p = plan(spec_of("diversification: {max_pool_share: 1.0, max_zone_share: 1.0}"), [offer(zone="a", hint=3)])
    assert not p.feasible and "capacity hints) allows 3 of 8" in p.shortfall


# ---- re-plans ----------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["price-capacity-optimized", "lowest-price", "capacity-optimized", "diversified"])
@pytest.mark.parametrize("kind", ["independent", "coupled"])
def test_replan_of_an_unchanged_fleet_changes_nothing(strategy, kind):
    rng = random.Random(3)
    offers = [
        offer(
            zone=f"z{i}",
            price=round(rng.uniform(1, 3), 1),
            rate=round(rng.uniform(0.05, 0.5), 2),
            gpus=rng.choice([1, 2, 4]),
        )
        for i in range(20)
    ]
    offers += [offer(zone=f"o{i}", spot=False, price=3.0 + i / 10) for i in range(3)]
    spec = spec_of(
        f"strategy: {strategy}\nworkload: {{kind: {kind}}}\ndiversification: {{max_pool_share: 0.4, min_pools: 2}}",
        gpus=16,
        on_demand=2,
    )
    first = plan(spec, offers)
    again = plan(spec, offers, current=first.counts())
    assert again.counts() == first.counts()
    assert any("keeps" in n for n in again.notes)


def test_replan_keeps_running_pools_when_an_equal_pool_appears():
    spec = spec_of("diversification: {max_pool_share: 1.0, max_zone_share: 1.0}")
    running = plan(spec, [offer(zone="a", price=1.0)])
    again = plan(spec, [offer(zone="a", price=1.0), offer(zone="b", price=1.0)], current=running.counts())
    assert again.counts() == {"aws/r1/a/t/spot": 8}


def test_replan_keeps_dearer_running_pools_and_plans_only_the_gap():
    """Replacements the rebalancer put in dearer pools are kept: swapping them for the cheaper
    pools would terminate running nodes to launch the same GPUs elsewhere."""
    offers = [offer(zone=z, price=1.0 + i / 10) for i, z in enumerate("abcdef")]
    spec = spec_of("diversification: {max_pool_share: 0.25, min_pools: 4}", gpus=32)
    first = plan(spec, offers)
    assert first.counts() == {f"aws/r1/{z}/t/spot": 8 for z in "abcd"}
    running = {"aws/r1/a/t/spot": 8, "aws/r1/b/t/spot": 8, "aws/r1/e/t/spot": 8, "aws/r1/f/t/spot": 8}
    assert plan(spec, offers, current=running).counts() == running
    short = {"aws/r1/e/t/spot": 8, "aws/r1/f/t/spot": 8}
    assert plan(spec, offers, current=short).counts() == {**short, "aws/r1/a/t/spot": 8, "aws/r1/b/t/spot": 8}


def test_replan_moves_only_what_a_block_forces():
    offers = [offer(zone=z, price=1.0 + i / 10) for i, z in enumerate("abc")]
    spec = spec_of("diversification: {max_pool_share: 0.5}")
    first = plan(spec, offers)
    assert first.counts() == {"aws/r1/a/t/spot": 4, "aws/r1/b/t/spot": 4}
    after = plan(spec, offers, current=first.counts(), blocked=["aws/r1/a"])
    assert after.counts() == {"aws/r1/b/t/spot": 4, "aws/r1/c/t/spot": 4}
    assert any("no longer allowed" in n for n in after.notes)


def test_plan_round_trips_through_json():
    offers = [offer(zone="a", price=1.0), offer(zone="o", spot=False, price=3.0)]
    p = plan(spec_of(on_demand=2), offers)
    again = Plan.from_json(p.to_json())
    assert again == p and again.id == p.id
    assert {a.offer.market for a in again.allocations} == {Market.SPOT, Market.ON_DEMAND}


def test_planning_does_not_import_scipy():
    """`fleet plan` reaches HiGHS through highspy; scipy (half a second to import) stays off its path."""
    code = (
        "import sys\nfrom fleet.catalog import filter_for_spec, snapshot_offers\n"
        "from fleet.planning.planner import plan\nfrom fleet.spec import load_spec\n"
        "spec = load_spec('examples/h100-multicloud.yaml')\n"
        "p = plan(spec, filter_for_spec(snapshot_offers(), spec))\n"
        "assert p.allocations, p\n"
        "print(sorted(m for m in sys.modules if m == 'scipy' or m.startswith('scipy.')))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
