"""Pure tests of ``fleet.rebalance.decide``: one test (or a few) per rule of the rebalancer."""

from __future__ import annotations

import pytest

from fleet.model import InterruptionSource, Market, Offer, PoolKey
from fleet.rebalance import (
    Decision,
    Exposure,
    Launch,
    ObservedInstance,
    PolicyState,
    PoolEvent,
    RaiseBid,
    Terminate,
    decide,
)
from fleet.rebalance.backoff import backoff_until
from fleet.rebalance.learning import exposure_of, learned_offers, posterior_rate
from fleet.spec import parse_spec
from providers.base import RaisesBids

NOW = 1_800_000_000.0
HOUR = 3600.0

SPEC = """
name: rb
capacity:
  gpus: 32
  accelerators: [H100]
  gpus_per_node: {{min: 8, max: 8}}
  on_demand_gpus: {baseline}
diversification: {{min_pools: 1, max_pool_share: 1.0, max_zone_share: 1.0}}
rebalance:
  critical_gpus: {critical}
  max_moves_per_pass: {moves}
{extra}
"""


def spec(baseline: int = 0, critical: int = 16, moves: int = 2, extra: str = ""):
    return parse_spec(SPEC.format(baseline=baseline, critical=critical, moves=moves, extra=extra))


def offer(
    name: str,
    market: Market = Market.SPOT,
    price: float = 10.0,
    rate: float = 0.01,
    hint: int | None = None,
    provider: str = "aws",
    od: float | None = 30.0,
) -> Offer:
    pool = PoolKey(provider=provider, region="r1", zone=name, instance_type="p5.48xlarge", market=market)
    return Offer(
        pool=pool,
        accelerator="H100",
        gpus=8,
        price_per_hour=price,
        on_demand_price=od,
        interruptions_per_hour=rate if market is Market.SPOT else 0.0,
        interruption_source=InterruptionSource.PROVIDER_PRIOR if market is Market.SPOT else InterruptionSource.NONE,
        capacity_hint=hint,
    )


SPOT = [offer("a"), offer("b", price=10.5), offer("c", price=11.0), offer("d", price=11.5)]
OD = offer("od", Market.ON_DEMAND, price=30.0)
OFFERS = SPOT + [OD]

_seq = iter(range(1_000_000))


def inst(
    o: Offer,
    *,
    age: float = 5 * HOUR,
    ours: bool = True,
    notice: str = "",
    outbid: bool = False,
    price: float | None = None,
) -> ObservedInstance:
    return ObservedInstance(
        id=f"i-{next(_seq)}",
        pool=o.pool.id,
        market=o.market,
        accelerator="H100",
        gpus=8,
        price_per_hour=o.price_per_hour if price is None else price,
        launched_at=NOW - age,
        ours=ours,
        notice=notice,
        outbid=outbid,
    )


def launched(d: Decision) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in d.launches:
        out[a.pool] = out.get(a.pool, 0) + a.count
    return out


def weighted_launched(d: Decision, market: Market | None = None) -> float:
    return sum(8 * a.count for a in d.launches if market is None or a.offer.market is market)


# ---- nothing to do ----------------------------------------------------------------------


def test_a_fleet_at_target_needs_no_action():
    running = [inst(SPOT[0]), inst(SPOT[0]), inst(SPOT[1]), inst(SPOT[1])]
    d = decide(spec(), OFFERS, running, [], NOW)
    assert d.actions == () and d.short_weighted_gpus == 0 and d.healthy_weighted_gpus == 32


# ---- replace lost spot, avoiding pools that just failed us ---------------------------------


def test_lost_spot_is_replaced_away_from_the_pool_that_interrupted():
    running = [inst(SPOT[0]), inst(SPOT[1]), inst(SPOT[1])]  # one node of pool a was preempted
    events = [PoolEvent(SPOT[0].pool.id, "interrupted", NOW - 60)]
    d = decide(spec(), OFFERS, running, events, NOW)
    assert weighted_launched(d) == 8 and SPOT[0].pool.id not in launched(d)
    assert all(a.reason == "replace-lost" and a.offer.market is Market.SPOT for a in d.launches)
    assert SPOT[0].pool.id in d.blocked or d.short_weighted_gpus == 0
    assert not d.terminations  # the healthy node in the interrupted pool stays


def test_a_pool_that_answered_no_capacity_is_avoided_too():
    running = [inst(SPOT[1]), inst(SPOT[1])]
    events = [PoolEvent(SPOT[0].pool.id, "no-capacity", NOW - 30)]
    d = decide(spec(), OFFERS, running, events, NOW)
    assert weighted_launched(d) == 16 and SPOT[0].pool.id not in launched(d)
    assert SPOT[0].pool.id in d.blocked


def test_backoff_doubles_per_event_and_decays():
    policy = spec().rebalance  # 600 s, doubling, 6 h cap, 24 h memory
    pool = SPOT[0].pool.id
    one = [PoolEvent(pool, "interrupted", NOW - 500)]
    assert backoff_until(one, NOW, policy) == {pool: NOW - 500 + 600}
    assert backoff_until(one, NOW + 200, policy) == {}  # expired
    three = [PoolEvent(pool, "interrupted", NOW - t) for t in (3000, 2000, 1000)]
    assert backoff_until(three, NOW, policy) == {pool: NOW - 1000 + 2400}  # 600 * 2**2
    many = [PoolEvent(pool, "no-capacity", NOW - 60 * k) for k in range(1, 20)]
    assert backoff_until(many, NOW, policy)[pool] == NOW - 60 + 6 * HOUR  # capped
    # a day later the old events are forgotten: one new event gives the short back-off again
    later = NOW + 25 * HOUR
    again = three + [PoolEvent(pool, "interrupted", later - 10)]
    assert backoff_until(again, later, policy) == {pool: later - 10 + 600}


def test_backed_off_pool_is_used_again_once_the_backoff_decays():
    running = [inst(SPOT[1]), inst(SPOT[1]), inst(SPOT[0])]
    events = [PoolEvent(SPOT[0].pool.id, "interrupted", NOW - 2 * HOUR)]
    d = decide(spec(), OFFERS, running, events, NOW)
    assert launched(d) == {SPOT[0].pool.id: 1}  # cheapest pool again


# ---- on-demand fallback up to the critical level ------------------------------------------


def test_spot_lost_everywhere_falls_back_to_on_demand_up_to_the_critical_level_only():
    no_spot = [offer(o.pool.zone, price=o.price_per_hour, hint=0) for o in SPOT] + [OD]
    d = decide(spec(critical=16), no_spot, [], [], NOW)
    assert launched(d) == {OD.pool.id: 2}
    assert all(a.reason == "fallback" for a in d.launches)
    assert d.on_demand_weighted_gpus == 16 and d.short_weighted_gpus == 16
    assert any("critical level" in n for n in d.notes)


def test_spot_short_fills_what_spot_can_and_on_demand_only_up_to_the_level():
    scarce = [offer("a", hint=1), offer("b", price=10.5, hint=0), offer("c", hint=0), offer("d", hint=0), OD]
    d = decide(spec(critical=16), scarce, [], [], NOW)
    got = launched(d)
    assert got[scarce[0].pool.id] == 1
    assert weighted_launched(d, Market.ON_DEMAND) <= 16
    assert weighted_launched(d) == 24  # 8 spot + 16 on-demand; the last 8 stay missing
    assert d.short_weighted_gpus == 8


def test_default_critical_level_is_the_baseline():
    s = parse_spec(
        "name: rb\ncapacity: {gpus: 32, accelerators: [H100], gpus_per_node: {min: 8, max: 8}, on_demand_gpus: 8}\n"
    )
    assert s.critical_gpus == 8
    no_spot = [offer(o.pool.zone, hint=0) for o in SPOT] + [OD]
    d = decide(s, no_spot, [], [], NOW)
    assert launched(d) == {OD.pool.id: 1} and d.launches[0].reason == "baseline"


def test_critical_level_outside_baseline_and_target_is_a_clear_spec_error():
    from fleet.errors import SpecError

    with pytest.raises(SpecError, match="critical_gpus"):
        spec(baseline=8, critical=4)
    with pytest.raises(SpecError, match="critical_gpus"):
        spec(critical=64)


# ---- return to spot, with hysteresis and a disruption budget --------------------------------


def fallback_fleet(age: float) -> list[ObservedInstance]:
    return [inst(OD, age=age) for _ in range(4)]


def test_return_to_spot_moves_at_most_the_budget_per_pass_make_before_break():
    d = decide(spec(moves=2), OFFERS, fallback_fleet(age=2 * HOUR), [], NOW)
    assert len(d.terminations) == 2 and all(t.reason == "return-to-spot" for t in d.terminations)
    assert weighted_launched(d, Market.SPOT) == 16 and weighted_launched(d, Market.ON_DEMAND) == 0
    assert all(set(t.after) == set(launched(d)) for t in d.terminations)
    assert d.state.last_return_at == NOW
    # launches come first in the action list: make before break
    kinds = [a.kind for a in d.actions]
    assert kinds.index("terminate") > max(i for i, k in enumerate(kinds) if k == "launch")


def test_young_fallback_is_not_returned():
    d = decide(spec(), OFFERS, fallback_fleet(age=600), [], NOW)
    assert d.actions == ()


def test_return_needs_the_minimum_saving():
    dear_spot = [offer(o.pool.zone, price=27.0) for o in SPOT] + [OD]  # saves 10% < 20%
    assert decide(spec(), dear_spot, fallback_fleet(age=2 * HOUR), [], NOW).actions == ()


def test_return_cooldown_waits_after_the_last_return():
    s = spec(extra="  return_cooldown_seconds: 3600")
    state = PolicyState(last_return_at=NOW - 600)
    assert decide(s, OFFERS, fallback_fleet(age=2 * HOUR), [], NOW, state).actions == ()
    assert decide(s, OFFERS, fallback_fleet(age=2 * HOUR), [], NOW, PolicyState(NOW - 7200)).terminations


def test_return_never_goes_below_the_baseline():
    fleet = fallback_fleet(age=2 * HOUR)
    d = decide(spec(baseline=24, critical=24, moves=5), OFFERS, fleet, [], NOW)
    assert len(d.terminations) == 1  # 32 on-demand, baseline 24: one node may go


def test_a_flapping_pool_causes_no_churn_beyond_the_budget():
    """Spot is available every other pass; a tiny world applies each decision."""
    s = spec(critical=32, moves=1)
    fleet: list[ObservedInstance] = [inst(o) for o in SPOT]
    events: list[PoolEvent] = []
    state = PolicyState()
    now = NOW
    moves = []
    for k in range(12):
        now += HOUR
        available = k % 2 == 0
        if not available:  # the market takes every spot node back
            events += [PoolEvent(i.pool, "interrupted", now - 60) for i in fleet if i.market is Market.SPOT]
            fleet = [i for i in fleet if i.market is not Market.SPOT]
        offers = [offer(o.pool.zone, price=o.price_per_hour, hint=None if available else 0) for o in SPOT] + [OD]
        d = decide(s, offers, fleet, events, now, state)
        state = d.state
        returns = [t for t in d.terminations if t.reason == "return-to-spot"]
        assert len(returns) <= 1
        moves.append(len(returns))
        gone = {t.instance_id for t in d.terminations}
        fleet = [i for i in fleet if i.id not in gone]
        for a in d.launches:
            fleet += [
                ObservedInstance(
                    id=f"n-{next(_seq)}",
                    pool=a.pool,
                    market=a.offer.market,
                    accelerator="H100",
                    gpus=8,
                    price_per_hour=a.offer.price_per_hour,
                    launched_at=now,
                )
                for _ in range(a.count)
            ]
        assert sum(8 for _ in fleet) <= 32 + 8  # never over-filled by more than one node in flight
        assert sum(8 for i in fleet if i.market is Market.ON_DEMAND) <= 32
    assert sum(moves) <= 6


# ---- warnings: act before the node dies -------------------------------------------------


def test_rebalance_recommendation_starts_a_replacement_then_retires_the_old_node():
    warned = inst(SPOT[0], notice="rebalance")
    running = [warned, inst(SPOT[0]), inst(SPOT[1]), inst(SPOT[1])]
    d = decide(spec(), OFFERS, running, [], NOW)
    assert weighted_launched(d) == 8 and SPOT[0].pool.id not in launched(d)
    assert [a.reason for a in d.launches] == ["early-replace"] and not d.terminations
    # next pass: the replacement runs, so the warned node is retired
    replacement = inst(d.launches[0].offer, age=60)
    d2 = decide(spec(), OFFERS, running + [replacement], [], NOW + 120)
    assert [(t.instance_id, t.reason) for t in d2.terminations] == [(warned.id, "replaced-early")]
    assert not d2.launches


def test_a_final_eviction_notice_is_replaced_but_left_to_the_provider():
    evicted = inst(SPOT[0], notice="preempt")
    running = [evicted, inst(SPOT[0]), inst(SPOT[1]), inst(SPOT[1])]
    d = decide(spec(), OFFERS, running, [], NOW)
    assert weighted_launched(d) == 8 and not d.terminations
    replacement = inst(d.launches[0].offer, age=60)
    assert decide(spec(), OFFERS, running + [replacement], [], NOW + 60).actions == ()


# ---- Vast: raise the bid within the cap, or replace ---------------------------------------

VAST = offer("host1", price=2.0, provider="vast", od=4.0)
VAST_ALT = offer("host2", price=2.4, provider="vast", od=4.0)


def test_outbid_instance_gets_a_raised_bid_within_the_cap_when_the_provider_bids():
    running = [inst(VAST, outbid=True, price=1.8)] + [inst(VAST_ALT) for _ in range(3)]
    d = decide(spec(), [VAST, VAST_ALT], running, [], NOW, bidding={"vast"})
    assert d.bids == [RaiseBid(running[0].id, VAST.pool.id, bid=2.3, cap=3.6)]
    assert not d.launches and not d.terminations


def test_outbid_beyond_the_cap_or_without_bidding_is_replaced():
    pricey = offer("host1", price=3.9, provider="vast", od=4.0)  # min bid above 0.9 x on-demand
    running = [inst(pricey, outbid=True, price=1.8)] + [inst(VAST_ALT) for _ in range(3)]
    d = decide(spec(), [pricey, VAST_ALT], running, [], NOW, bidding={"vast"})
    assert not d.bids and launched(d) == {VAST_ALT.pool.id: 1}
    without = decide(spec(), [VAST, VAST_ALT], running, [], NOW, bidding=())
    assert not without.bids and weighted_launched(without) == 8
    replacement = inst(VAST_ALT, age=60)
    after = decide(spec(), [VAST, VAST_ALT], running + [replacement], [], NOW, bidding=())
    assert [(t.instance_id, t.reason) for t in after.terminations] == [(running[0].id, "outbid-replaced")]


def test_capability_check():
    from providers.aws.provider import AwsProvider
    from providers.vast.provider import VastProvider

    assert issubclass(VastProvider, RaisesBids) and not issubclass(AwsProvider, RaisesBids)


# ---- baseline, budget, foreign instances ------------------------------------------------


def test_lost_baseline_comes_back_on_demand():
    running = [inst(SPOT[0]), inst(SPOT[0]), inst(SPOT[1])]
    d = decide(spec(baseline=8, critical=8), OFFERS, running, [], NOW)
    assert launched(d) == {OD.pool.id: 1} and d.launches[0].reason == "baseline"


def test_launches_never_exceed_the_budget():
    s = spec(extra="budget: {max_per_hour: 25}")
    running = [inst(SPOT[0])]  # $10/h alive; two more spot nodes would pass $25/h
    d = decide(s, OFFERS, running, [], NOW)
    spend = 10 + sum(a.offer.price_per_hour * a.count for a in d.launches)
    assert spend <= 25 and weighted_launched(d) == 8


def test_foreign_instances_count_for_nothing_and_are_never_touched():
    foreign = [inst(OD, ours=False, age=10 * HOUR) for _ in range(4)] + [inst(SPOT[0], ours=False, notice="rebalance")]
    d = decide(spec(), OFFERS, foreign, [], NOW)
    assert weighted_launched(d) == 32
    touched = {a.instance_id for a in d.actions if isinstance(a, (Terminate, RaiseBid))}
    assert not touched & {i.id for i in foreign}


def test_a_pool_gone_from_the_offers_keeps_its_nodes_and_gets_no_more():
    gone = offer("z", price=9.0)
    running = [inst(gone), inst(gone), inst(SPOT[0])]
    d = decide(spec(), OFFERS, running, [], NOW)
    assert weighted_launched(d) == 8 and gone.pool.id not in launched(d) and not d.terminations


# ---- learning -------------------------------------------------------------------------


def test_gamma_poisson_posterior():
    assert posterior_rate(0.01, 100, Exposure(hours=0, interruptions=0)) == pytest.approx(0.01)
    assert posterior_rate(0.01, 100, Exposure(hours=100, interruptions=20)) == pytest.approx(21 / 200)
    assert posterior_rate(0.0, 100, Exposure(hours=900, interruptions=0)) == 0.0


def test_exposure_counts_hours_and_preemptions():
    runs = [("p", NOW - 2 * HOUR, NOW - HOUR, True), ("p", NOW - HOUR, None, False), ("q", NOW, NOW, False)]
    got = exposure_of(runs, NOW)
    assert got["p"] == Exposure(hours=2.0, interruptions=1) and got["q"] == Exposure(hours=0.0, interruptions=0)


def test_learned_rates_reach_the_planner():
    flaky = {SPOT[0].pool.id: Exposure(hours=50, interruptions=40)}
    learned = {o.pool.id: o for o in learned_offers(OFFERS, flaky, 100)}
    assert learned[SPOT[0].pool.id].interruption_source is InterruptionSource.OBSERVED
    assert learned[SPOT[0].pool.id].interruptions_per_hour == pytest.approx(41 / 150)
    assert learned[SPOT[1].pool.id] == SPOT[1]
    running = [inst(SPOT[1]), inst(SPOT[1]), inst(SPOT[2])]
    calm = decide(spec(), OFFERS, running, [], NOW)
    burned = decide(spec(), OFFERS, running, [], NOW, exposure=flaky)
    assert launched(calm) == {SPOT[0].pool.id: 1}  # cheapest while its record is clean
    assert SPOT[0].pool.id not in launched(burned)  # avoided once this fleet saw it fail
    assert any(o.interruption_source is InterruptionSource.OBSERVED for o in burned.offers)


def test_charging_the_cold_start_leaves_a_pool_that_drops_often_which_the_restart_alone_keeps():
    # pool a: 10.0/h, seen losing 17 nodes in 100 node-hours (0.09/h learned); b: 10.5/h at the catalog's 0.01/h
    flaky = {SPOT[0].pool.id: Exposure(hours=100, interruptions=17)}
    running = [inst(SPOT[1]), inst(SPOT[1]), inst(SPOT[2])]
    plain = decide(spec(), OFFERS, running, [], NOW, exposure=flaky)
    charged = spec(extra="  charge_cold_start: true\n  cold_start_seconds: 600")
    assert launched(plain) == {SPOT[0].pool.id: 1}  # 300 s a loss: 4.4% dearer in true cost, still cheapest
    assert launched(decide(charged, OFFERS, running, [], NOW, exposure=flaky)) == {SPOT[1].pool.id: 1}
    # without a record the catalog's rates decide, charged or not; fleet plan keeps the workload's restart
    assert launched(decide(charged, OFFERS, running, [], NOW)) == {SPOT[0].pool.id: 1}
    from fleet.planning import plan

    learned = learned_offers(OFFERS, flaky, 100)
    assert plan(charged, learned).counts() == plan(spec(), learned).counts()


def test_decision_serialises():
    d = decide(spec(), OFFERS, [inst(SPOT[0])], [], NOW)
    data = d.to_dict()
    assert data["actions"] and all(a["kind"] == "launch" for a in data["actions"])
    assert isinstance(d.launches[0], Launch)


# ---- the head: never moved to spot, a lost head is an incident ------------------------------

CPU_HEAD = Offer(
    pool=PoolKey(provider="aws", region="r1", zone="h", instance_type="m5zn.large", market=Market.ON_DEMAND),
    accelerator="CPU",
    gpus=0,
    vcpus=2,
    memory_gib=8,
    price_per_hour=0.17,
)


def head_inst(age: float = 5 * HOUR) -> ObservedInstance:
    return ObservedInstance(
        id=f"h-{next(_seq)}",
        pool=CPU_HEAD.pool.id,
        market=Market.ON_DEMAND,
        accelerator="CPU",
        gpus=0,
        price_per_hour=0.17,
        launched_at=NOW - age,
        role="head",
    )


def test_a_running_head_is_neither_capacity_nor_moved_to_spot():
    a, b, od = offer("a", price=5.0), offer("b", price=5.0), offer("od", Market.ON_DEMAND, price=30.0)
    head = head_inst()
    # at target on spot, one old on-demand fallback beyond the baseline: it returns to spot, the head stays
    running = [inst(a), inst(a), inst(b), inst(od), head]
    d = decide(spec(extra="head: {}"), [a, b, od, CPU_HEAD], running, [], NOW)
    assert head.id not in {t.instance_id for t in d.terminations}
    assert all(x.reason == "return-to-spot" for x in d.launches) and not d.incidents
    assert [t.instance_id for t in d.terminations] == [running[3].id]
    # the head does not count toward the target: three workers are short by one node
    short = decide(spec(extra="head: {}"), [a, b, CPU_HEAD], [inst(a), inst(b), inst(a), head], [], NOW)
    assert weighted_launched(short, Market.SPOT) == 8 and CPU_HEAD.pool.id not in launched(short)


def test_a_lost_head_is_an_incident_and_is_relaunched_on_demand():
    a, b = offer("a", price=5.0), offer("b", price=5.0)
    workers = [inst(a), inst(a), inst(b), inst(b)]
    d = decide(spec(extra="head: {}"), [a, b, CPU_HEAD], workers, [], NOW)
    (launch,) = d.launches
    assert (launch.pool, launch.count, launch.reason) == (CPU_HEAD.pool.id, 1, "head-lost")
    assert launch.offer.market is Market.ON_DEMAND
    (incident,) = d.incidents
    assert incident.startswith("INCIDENT: 1 of 1 head node(s) of fleet 'rb' lost") and CPU_HEAD.pool.id in incident
    assert d.to_dict()["incidents"] == [incident]
    # nothing fits the head: still an incident, no launch
    d = decide(spec(extra="head: {vcpus: 64}"), [a, b, CPU_HEAD], workers, [], NOW)
    assert not d.launches and "cannot relaunch" in d.incidents[0]
    # a spec without a head never has incidents
    assert not decide(spec(), [a, b], workers, [], NOW).incidents


# ---- a back-off yields when the other pools cannot reach the target ------------------------------

REGIONAL = parse_spec("""
name: rb
capacity: {gpus: 32, accelerators: [H100], gpus_per_node: {min: 8, max: 8}}
diversification: {min_pools: 1, max_pool_share: 0.5}
rebalance: {critical_gpus: 0}
""")


@pytest.mark.parametrize("kind", ["interrupted", "no-capacity"])
def test_a_pool_backed_off_for_an_interruption_is_used_again_when_nothing_else_can_refill(kind: str):
    # two spot pools (as an Azure scale set's regions are), each capped at half the fleet: one node of
    # pool a was evicted, so only a can take the replacement
    running = [inst(SPOT[0]), inst(SPOT[1]), inst(SPOT[1])]
    events = [PoolEvent(SPOT[0].pool.id, kind, NOW - 60)]
    d = decide(REGIONAL, [SPOT[0], SPOT[1], OD], running, events, NOW)
    if kind == "interrupted":
        assert launched(d) == {SPOT[0].pool.id: 1} and d.short_weighted_gpus == 0
        assert any("back-off lifted" in n for n in d.notes) and not any("critical level" in n for n in d.notes)
    else:  # asking a pool that just had no capacity again would be refused
        assert launched(d) == {} and d.short_weighted_gpus == 8


# ---- on-demand the diversification caps require is part of the fleet, not a fallback --------------

ONE_ZONE = parse_spec("""
name: rb
capacity: {gpus: 2, accelerators: [H100], gpus_per_node: {min: 1, max: 1}}
""")


def machine(m: int, market: Market) -> Offer:
    """A one-GPU Vast machine's pool: every machine in one geolocation, so one zone."""
    pool = PoolKey(provider="vast", region="us-texas", zone="", instance_type=f"1x-H100_SXM-m{m}", market=market)
    spot = market is Market.SPOT
    return Offer(
        pool=pool,
        accelerator="H100",
        gpus=1,
        price_per_hour=0.585 if spot else 1.51,
        on_demand_price=1.51,
        interruptions_per_hour=0.05 if spot else 0.0,
        capacity_hint=1,
        interruption_source=InterruptionSource.PROVIDER_PRIOR if spot else InterruptionSource.NONE,
    )


def test_a_lost_node_the_zone_cap_made_on_demand_is_replaced_though_the_critical_level_is_zero():
    # the zone cap (half the spot part, at least one node) lets one zone hold one spot GPU of two,
    # so the planned fleet is one spot and one on-demand node; the on-demand machine went away
    kept = machine(901, Market.SPOT)
    running = [
        ObservedInstance(
            id="v-1",
            pool=kept.pool.id,
            market=Market.SPOT,
            accelerator="H100",
            gpus=1,
            price_per_hour=kept.price_per_hour,
            launched_at=NOW - HOUR,
        )
    ]
    offers = [
        machine(901, Market.SPOT).model_copy(update={"capacity_hint": 0}),
        machine(902, Market.SPOT),
        machine(902, Market.ON_DEMAND),
    ]
    events = [PoolEvent(machine(900, Market.ON_DEMAND).pool.id, "interrupted", NOW - 60)]
    assert ONE_ZONE.critical_gpus == 0
    d = decide(ONE_ZONE, offers, running, events, NOW)
    assert launched(d) == {machine(902, Market.ON_DEMAND).pool.id: 1} and d.short_weighted_gpus == 0
    assert not any("critical level" in n for n in d.notes)


# ---- the bridge (rule 9) and spot moves (rule 11) ---------------------------------------


def test_the_bridge_covers_a_loss_with_on_demand_at_once_and_releases_it_once_spot_is_ready():
    s = spec(critical=32, extra="  bridge: true")
    running = [inst(SPOT[0]), inst(SPOT[0]), inst(SPOT[1])]
    d = decide(s, OFFERS, running, [], NOW)
    reasons = {(a.offer.market, a.reason): a.count for a in d.launches}
    assert reasons == {(Market.SPOT, "replace-lost"): 1, (Market.ON_DEMAND, "bridge"): 1}
    replacement = ObservedInstance(
        id="i-new",
        pool=d.launches[0].pool,
        market=Market.SPOT,
        accelerator="H100",
        gpus=8,
        price_per_hour=10.0,
        launched_at=NOW,
        starting=True,
    )
    bridge = ObservedInstance(
        id="i-od",
        pool=OD.pool.id,
        market=Market.ON_DEMAND,
        accelerator="H100",
        gpus=8,
        price_per_hour=30.0,
        launched_at=NOW,
        starting=True,
    )
    assert decide(s, OFFERS, [*running, replacement, bridge], [], NOW + 60).actions == ()  # still starting
    ready = [*running, replace_starting(replacement), replace_starting(bridge)]
    d = decide(s, OFFERS, ready, [], NOW + 600)
    assert [(t.instance_id, t.reason, t.after) for t in d.terminations] == [("i-od", "bridge-released", ())]
    assert not d.launches
    assert decide(spec(critical=32), OFFERS, running, [], NOW).launches[0].reason == "replace-lost"
    assert len(decide(spec(critical=32), OFFERS, running, [], NOW).launches) == 1  # no bridge unless asked


def replace_starting(i: ObservedInstance) -> ObservedInstance:
    from dataclasses import replace

    return replace(i, starting=False)


def test_spot_moves_take_ready_nodes_to_a_cheaper_pool_make_before_break():
    dear = [inst(SPOT[3]) for _ in range(4)]  # 11.5/h; pool a offers 10.0/h
    s = spec(extra="  spot_moves: true\n  min_saving: 0.1")
    d = decide(s, OFFERS, dear, [], NOW)
    assert launched(d) == {SPOT[0].pool.id: 2}  # max_moves_per_pass 2
    assert len(d.terminations) == 2 and all(t.after == (SPOT[0].pool.id,) for t in d.terminations)
    assert decide(spec(), OFFERS, dear, [], NOW).actions == ()  # off by default
    assert decide(spec(extra="  spot_moves: true"), OFFERS, dear, [], NOW).actions == ()  # saves 13% < 20%


def test_the_hedge_keeps_zones_that_failed_together_within_the_spares():
    six = [*SPOT, offer("e", price=12.0), offer("f", price=12.5)]
    s = spec(critical=0, extra="  hedge: true")
    ids = [o.pool.id for o in six]
    # one spare node (the catalog's rates lose far less than a node within a cold start): 5 nodes, one a zone
    assert launched(decide(s, [*six, OD], [], [], NOW)) == {p: 1 for p in ids[:5]}
    together = [PoolEvent(ids[0], "interrupted", NOW - HOUR), PoolEvent(ids[1], "interrupted", NOW - HOUR + 5)]
    d = decide(s, [*six, OD], [], together, NOW)
    assert launched(d) == {p: 1 for p in [ids[0], *ids[2:]]}  # a and b failed together: one node for both
    apart = [PoolEvent(ids[0], "interrupted", NOW - HOUR), PoolEvent(ids[1], "interrupted", NOW - HOUR + 300)]
    assert launched(decide(s, [*six, OD], [], apart, NOW)) == {p: 1 for p in ids[:5]}
    assert launched(decide(spec(critical=0), [*six, OD], [], together, NOW)) == {ids[0]: 4}  # no hedge, no caps


def test_correlated_groups_are_the_zones_lost_in_one_pass_within_the_memory():
    from fleet.rebalance.hedge import correlated_groups

    def at(zone: str, t: float) -> PoolEvent:
        return PoolEvent(offer(zone).pool.id, "interrupted", NOW - t)

    events = [
        at("a", 10),
        at("b", 0),
        at("c", 3 * HOUR),
        at("d", 3 * HOUR - 30),
        at("a", 2 * HOUR),
        at("b", 2 * HOUR),
        at("c", 2 * HOUR),
        at("e", 30 * HOUR),
        at("f", 30 * HOUR),
        PoolEvent(offer("e").pool.id, "no-capacity", NOW),
        PoolEvent(offer("f").pool.id, "no-capacity", NOW),
    ]
    got = correlated_groups(events, NOW, 24 * HOUR)
    assert got == [frozenset({"aws/r1/a", "aws/r1/b", "aws/r1/c"}), frozenset({"aws/r1/c", "aws/r1/d"})]
