"""The simulator against hand-made traces with known answers, and on the shipped traces."""

from __future__ import annotations

import pytest
from simulate_world import dollars, fleet_spec, on_demand, spot, trace

from fleet.catalog import snapshot_offers
from fleet.errors import FleetError
from fleet.simulate import SimOptions, simulate
from fleet.simulate.engine import run
from fleet.simulate.market import build_replay
from fleet.simulate.policies import AllOnDemand, CheapestFirst, EvenSpread, Rebalancer, SinglePool
from fleet.simulate.tracefile import UNLIMITED, ValueMeaning, load_traces, parse_trace, shipped_trace_dir


def test_one_zone_dropping_at_a_known_tick_falls_back_to_on_demand():
    spec = fleet_spec(2, "rebalance: {critical_gpus: 2}\ndiversification: {max_pool_share: 1, max_zone_share: 1}")
    offers = [spot("z1", 2.0), on_demand(10.0)]
    replay = build_replay(offers, [trace("z1", [0] * 10 + [1] * 10)])
    out = run(Rebalancer(spec, replay.offers), spec, replay, cold_ticks=1)
    # 2 spot nodes ticks 0-9, lost at tick 10, 2 on-demand nodes from tick 10, ready at 11
    assert out.interruptions == 2
    assert out.at_target == pytest.approx(18 / 19)
    assert out.cost == pytest.approx(dollars(2.0, 2 * 10) + dollars(10.0, 2 * 10))
    assert out.on_demand_node_hours == pytest.approx(2 * 10 * 600 / 3600)
    assert out.pools["gcp/r1/z1/a3-highgpu-1g/spot"].interruptions == 2


def test_two_zones_alternating_cheapest_first_moves_each_time():
    spec = fleet_spec(1)
    offers = [spot("z1", 2.0), spot("z2", 3.0), on_demand()]
    a = [0] * 5 + [1] * 5 + [0] * 5 + [1] * 5
    replay = build_replay(offers, [trace("z1", a), trace("z2", [1 - v for v in a])])
    out = run(CheapestFirst(spec, replay.offers), spec, replay, cold_ticks=1)
    # lost at ticks 5, 10, 15; at 5 and 15 the cheaper z1 refuses first, then z2 takes the node
    assert out.interruptions == 3
    assert out.failed_launches == 2
    assert out.at_target == pytest.approx(16 / 19)
    assert out.cost == pytest.approx(dollars(2.0, 10) + dollars(3.0, 10))
    assert out.on_demand_node_hours == 0


def test_count_trace_loses_the_excess_and_refills_when_capacity_returns():
    spec = fleet_spec(2)
    replay = build_replay([spot("z1", 2.0)], [trace("z1", [2, 2, 1, 1, 2, 2], ValueMeaning.COUNT)])
    out = run(CheapestFirst(spec, replay.offers), spec, replay, cold_ticks=1)
    assert out.interruptions == 1
    assert out.failed_launches == 2  # ticks 2 and 3: the pool holds only the survivor
    assert out.at_target == pytest.approx(2 / 5)
    assert out.cost == pytest.approx(dollars(2.0, 2 + 2 + 1 + 1 + 2 + 2))


def test_even_spread_and_single_pool_on_known_traces():
    spec = fleet_spec(2)
    offers = [spot("z1", 2.0), spot("z2", 3.0), on_demand(10.0)]
    replay = build_replay(offers, [trace("z1", [0] * 4 + [1] * 4), trace("z2", [0] * 8)])
    even = run(EvenSpread(spec, replay.offers), spec, replay, cold_ticks=1)
    assert even.interruptions == 1 and even.at_target == pytest.approx(6 / 7)
    assert even.cost == pytest.approx(dollars(2.0, 4) + dollars(3.0, 8 + 4))  # z1 refuses at 4: z2 takes it
    single = run(SinglePool(spec, replay.offers), spec, replay, cold_ticks=1)
    assert single.interruptions == 2 and single.on_demand_node_hours == pytest.approx(2 * 4 * 600 / 3600)
    od = run(AllOnDemand(spec, replay.offers), spec, replay, cold_ticks=1)
    assert od.at_target == 1.0 and od.cost == pytest.approx(dollars(10.0, 2 * 8))


def test_return_to_spot_waits_for_the_replacement_to_be_ready():
    spec = fleet_spec(
        1,
        "rebalance: {critical_gpus: 1, min_fallback_age_seconds: 0, backoff_seconds: 600}\n"
        "diversification: {max_pool_share: 1, max_zone_share: 1}",
    )
    offers = [spot("z1", 2.0), on_demand(10.0)]
    replay = build_replay(offers, [trace("z1", [0] * 3 + [1] * 3 + [0] * 14)])
    out = run(Rebalancer(spec, replay.offers), spec, replay, cold_ticks=2)
    assert out.at_target == pytest.approx(1 - 2 / 18)  # only the loss at tick 3 (cold start 2 ticks)
    assert out.on_demand_node_hours > 0 and out.interruptions == 1


def test_parse_trace_reads_values_and_names_bad_fields():
    assert parse_trace({"metadata": {"gap_seconds": 60}, "data": [0, 1]}, "z").capacity == (UNLIMITED, 0)
    assert parse_trace({"metadata": {"gap_seconds": 60}, "data": [0, 1]}, "z", ValueMeaning.ONE).capacity == (
        0,
        UNLIMITED,
    )
    assert parse_trace({"data": [3]}, "z", ValueMeaning.COUNT, gap_seconds=60).capacity == (3,)
    with pytest.raises(FleetError, match="gap_seconds.*--tick"):
        parse_trace({"data": [0]}, "z")
    with pytest.raises(FleetError, match="`data` holds -1"):
        parse_trace({"metadata": {"gap_seconds": 60}, "data": [0, -1]}, "z")


def test_mapping_file_replaces_the_zone_rule():
    offers = [spot("z1", 2.0), spot("z2", 3.0), on_demand()]
    replay = build_replay(offers, [trace("a", [0, 1]), trace("z2", [0, 0])], mapping={"a": ["gcp/r1/z1/"]})
    assert dict(replay.trace_of) == {"gcp/r1/z1/a3-highgpu-1g/spot": "a", "gcp/r1/z2/a3-highgpu-1g/spot": "z2"}
    plain = build_replay(offers, [trace("z2", [0, 0])])
    assert plain.unmapped == ("gcp/r1/z1/a3-highgpu-1g/spot",)


SHIPPED_SPEC = "rebalance: {critical_gpus: 8}\ndiversification: {min_pools: 3, max_pool_share: 0.5}"


def test_shipped_traces_load_with_no_options_and_map_onto_the_catalog():
    traces = load_traces(shipped_trace_dir())
    assert len(traces) == 13 and {t.gap_seconds for t in traces} == {600}
    spec = fleet_spec(8, SHIPPED_SPEC)
    report = simulate(spec, snapshot_offers(), traces, SimOptions(days=1, optimum=False))
    assert len(report.replay.capacity) == 12 and report.replay.unused == ("asia-south2-b",)
    assert [o.policy for o in report.outcomes][0] == "ours" and len(report.outcomes) == 7
    assert report.on_demand_cost and all(o.cost < report.on_demand_cost for o in report.outcomes[2:])


def test_the_same_seed_gives_the_same_result():
    spec = fleet_spec(3)
    counts = [3, 3, 2, 1, 3, 2, 2, 3, 1, 0, 3, 3]
    replay = build_replay(
        [spot("z1", 2.0), spot("z2", 2.5), on_demand()],
        [trace("z1", counts, ValueMeaning.COUNT), trace("z2", counts[::-1], ValueMeaning.COUNT)],
    )
    runs = [run(Rebalancer(spec, replay.offers), spec, replay, seed=7, keep_series=True) for _ in range(2)]
    assert runs[0] == runs[1]
    assert runs[0].interruptions > 0


def test_budget_is_never_exceeded_over_a_whole_trace():
    spec = fleet_spec(8, SHIPPED_SPEC + "\nbudget: {max_per_hour: 30}")
    report = simulate(
        spec, snapshot_offers(), load_traces(shipped_trace_dir()), SimOptions(baselines=False, optimum=False)
    )
    ours = report.outcomes[0]
    assert report.replay.ticks == 2114
    assert ours.launches > 8 and 0 < ours.max_spend_per_hour <= 30 + 1e-9


def test_fresh_node_rate_from_run_lengths():
    from fleet.simulate.hazard import fresh_node_rate, run_lengths

    bursty = [True] * 10 + [False] + [True, False] * 5 + [True] * 4
    assert run_lengths(bursty) == [(10, True)] + [(1, True)] * 5 + [(4, False)]
    # hour ticks, 2-hour horizon: the long run loses 2 of its 10 launches over 1+2*9 hours,
    # each flapping run loses its one launch after 1 hour, the censored run loses none (1+2*3 hours)
    assert fresh_node_rate(bursty, 3600, horizon_hours=2) == pytest.approx((2 + 5) / (19 + 5 + 7))
    assert fresh_node_rate([False, False], 3600) == 0.0
    # a steady trace, a drop every 10 available hours: a fresh node lives 5.5 h on average
    steady = ([True] * 10 + [False]) * 50
    assert fresh_node_rate(steady, 3600, horizon_hours=100) == pytest.approx(1 / 5.5)
