"""The bridge baselines, SpotHedge's placer and the make-before-break rule on hand-made traces."""

from __future__ import annotations

import pytest
from simulate_world import dollars, fleet_spec, on_demand, spot, trace

from fleet.provisioning.executor import may_break
from fleet.simulate.engine import run
from fleet.simulate.market import build_replay
from fleet.simulate.policies import GreedyBridge, Rebalancer, SinglePool, SpotHedge


def test_make_before_break_waits_for_ready_replacements_and_keeps_the_node_when_one_is_gone():
    assert may_break(["a", "b"], {"a", "b"}, {"a"}) is False
    assert may_break(["a", "b"], {"a", "b"}, {"a", "b"}) is True
    assert may_break(["a", "b"], {"a"}, {"a"}) is None
    assert may_break([], set(), set()) is True


def test_greedy_bridge_covers_every_cold_start_with_on_demand_and_releases_it_when_spot_is_ready():
    spec = fleet_spec(2)
    offers = [spot("z1", 2.0), spot("z2", 3.0), on_demand(10.0)]
    replay = build_replay(offers, [trace("z1", [0] * 5 + [1] * 5), trace("z2", [0] * 10)])
    out = run(GreedyBridge(spec, replay.offers), spec, replay, cold_ticks=1)
    # spot z1 ticks 0-4, lost at 5, z2 from 5; 2 on-demand bridge nodes at ticks 0 and 5 only
    assert out.interruptions == 2 and out.failed_launches == 2
    assert out.at_target == pytest.approx(8 / 9)  # tick 5: the bridge is starting too
    assert out.on_demand_node_hours == pytest.approx(4 * 600 / 3600)
    assert out.cost == pytest.approx(dollars(2.0, 10) + dollars(3.0, 10) + dollars(10.0, 4))


def test_greedy_bridge_keeps_on_demand_while_no_spot_pool_has_capacity():
    spec = fleet_spec(1)
    replay = build_replay([spot("z1", 2.0), on_demand(10.0)], [trace("z1", [0] * 2 + [1] * 4 + [0] * 4)])
    out = run(GreedyBridge(spec, replay.offers), spec, replay, cold_ticks=1)
    # lost at 2; on-demand from 2 until the spot node launched at 6 is ready at 7
    assert out.on_demand_node_hours == pytest.approx((1 + 5) * 600 / 3600)
    assert out.at_target == pytest.approx(8 / 9)


def test_spot_hedge_places_each_node_in_an_unused_active_zone_and_marks_a_lost_one_preempted():
    spec = fleet_spec(2)
    offers = [spot("z1", 2.0), spot("z2", 2.5), spot("z3", 3.0), on_demand(10.0)]
    replay = build_replay(offers, [trace("z1", [0] * 3 + [1] + [0] * 4), trace("z2", [0] * 8), trace("z3", [0] * 8)])
    out = run(SpotHedge(spec, replay.offers), spec, replay, cold_ticks=1)
    # z1 + z2; z1 lost at 3 goes PREEMPTED: the node moves to z3 and stays there when z1 is back
    assert out.interruptions == 1 and out.failed_launches == 0
    assert out.cost == pytest.approx(dollars(2.0, 3) + dollars(2.5, 8) + dollars(3.0, 5))
    assert out.at_target == pytest.approx(6 / 7)


def test_spot_hedge_resets_the_marks_when_fewer_than_two_zones_stay_active():
    spec = fleet_spec(1)
    offers = [spot("z1", 2.0), spot("z2", 2.5), on_demand(10.0)]
    replay = build_replay(offers, [trace("z1", [0] * 2 + [1] + [0] * 5), trace("z2", [0] * 8)])
    out = run(SpotHedge(spec, replay.offers), spec, replay, cold_ticks=1)
    # lost in z1 at 2: z1 PREEMPTED leaves only z2 ACTIVE, so the marks reset and z1 refuses: z2
    assert out.interruptions == 1 and out.failed_launches == 1
    assert out.cost == pytest.approx(dollars(2.0, 2) + dollars(2.5, 6))


def test_single_pool_holds_twice_the_target_only_for_the_cold_start_of_each_return():
    spec = fleet_spec(2)
    replay = build_replay([spot("z1", 2.0), on_demand(10.0)], [trace("z1", ([0] * 3 + [1] * 2) * 4)])
    out = run(SinglePool(spec, replay.offers), spec, replay, cold_ticks=1, keep_series=True)
    alive = [a + b for a, b in zip(out.on_demand_series, out.spot_series)]
    assert max(alive) == 4
    # each of the 3 returns overlaps spot and on-demand for one tick (make before break), no longer
    assert sum(1 for a in alive if a > 2) == 3


def test_ours_with_the_bridge_covers_a_loss_at_once_and_releases_on_demand_when_spot_is_ready():
    spec = fleet_spec(
        2, "rebalance: {critical_gpus: 2, bridge: true}\ndiversification: {max_pool_share: 1, max_zone_share: 1}"
    )
    offers = [spot("z1", 2.0), spot("z2", 3.0), on_demand(10.0)]
    replay = build_replay(offers, [trace("z1", [0] * 5 + [1] * 5), trace("z2", [0] * 10)])
    out = run(Rebalancer(spec, replay.offers), spec, replay, cold_ticks=1)
    assert out.on_demand_node_hours == pytest.approx(4 * 600 / 3600)  # 2 nodes for one tick at 0 and at 5
    assert out.at_target == pytest.approx(8 / 9)
    plain = run(
        Rebalancer(
            fleet_spec(2, "rebalance: {critical_gpus: 2}\ndiversification: {max_pool_share: 1, max_zone_share: 1}"),
            replay.offers,
        ),
        spec,
        replay,
        cold_ticks=1,
    )
    assert plain.on_demand_node_hours == 0


def test_charging_the_cold_start_keeps_ours_out_of_a_zone_that_drops_every_hour():
    # z1 (2.0/h) drops one tick in six, z2 (2.2/h) one in 24; both start at the catalog's 0.3/h
    offers = [spot("z1", 2.0, 0.3), spot("z2", 2.2, 0.3), on_demand(10.0)]
    replay = build_replay(offers, [trace("z1", ([0] * 5 + [1]) * 24), trace("z2", ([0] * 23 + [1]) * 6)])

    def ours(charge: str):
        spec = fleet_spec(
            1,
            f"rebalance: {{critical_gpus: 1, prior_hours: 1, bridge: true, charge_cold_start: {charge}}}\n"
            "diversification: {max_pool_share: 1, max_zone_share: 1}",
        )
        return run(Rebalancer(spec, replay.offers), spec, replay, cold_ticks=1)

    plain, charged = ours("false"), ours("true")
    z1 = "gcp/r1/z1/a3-highgpu-1g/spot"
    assert charged.pools[z1].interruptions < plain.pools[z1].interruptions
    assert charged.interruptions < plain.interruptions and charged.at_target > plain.at_target


def test_the_hedge_learns_zones_that_fail_together_and_the_next_co_failure_leaves_the_fleet_at_target():
    def down(*ticks: int) -> list[int]:
        return [1 if t in ticks else 0 for t in range(30)]

    offers = [spot(z, p) for z, p in [("z1", 2.0), ("z2", 2.1), ("z3", 2.5), ("z4", 2.6), ("z5", 2.7)]]
    replay = build_replay(
        [*offers, on_demand(10.0)],
        [trace("z1", down(5, 15)), trace("z2", down(5, 15)), *(trace(z, down(10, 11)) for z in ("z3", "z4"))]
        + [trace("z5", down())],
    )
    spec = fleet_spec(2, "rebalance: {hedge: true}\ndiversification: {max_pool_share: 1, max_zone_share: 1}")
    out = run(Rebalancer(spec, replay.offers), spec, replay, cold_ticks=1, keep_series=True, target=2)
    # one spare, one node a zone: z1 z2 z3; z1 and z2 fail together at 5 (below target), z3 and z4 at 10;
    # the refill after 10 puts one node in {z1, z2}, so their second co-failure at 15 takes one node only
    assert out.ready_series[5] == 1 and out.ready_series[10] == 1
    assert out.ready_series[15] == 2
    lost = {p.split("/")[2]: f.interruptions for p, f in out.pools.items()}
    assert lost["z1"] + lost["z2"] == 3
