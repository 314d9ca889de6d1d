"""The offline optimum (integer program) against brute force on tiny traces."""

from __future__ import annotations

import itertools
import random

import pytest
from simulate_world import GAP, fleet_spec, on_demand, spot, trace

from fleet.simulate.engine import run
from fleet.simulate.market import build_replay
from fleet.simulate.optimum import pools_of, solve
from fleet.simulate.policies import AllOnDemand, CheapestFirst
from fleet.simulate.tracefile import ValueMeaning


def brute_force(spec, replay, cold: int, target: float) -> float | None:
    """Cheapest alive-count schedule whose ready nodes (alive through their cold start) meet the
    target at every tick from ``cold`` on, by enumerating every schedule."""
    pools = pools_of(spec, replay)
    T = replay.ticks
    choices = []
    for _pid, w, _price, cap in pools:
        most = int(-(-target // w))
        choices.append([range(0, (most if cap is None else min(most, cap[t])) + 1) for t in range(T)])
    best = None
    flat = [rng for per_pool in choices for rng in per_pool]
    for combo in itertools.product(*flat):
        cost, ok = 0.0, True
        for t in range(cold, T):
            ready = 0.0
            for p, (_pid, w, _price, _cap) in enumerate(pools):
                ready += w * min(combo[p * T + t - j] for j in range(cold + 1))
            if ready < target - 1e-9:
                ok = False
                break
        if not ok:
            continue
        cost = sum(
            price * GAP / 3600 * combo[p * T + t] for p, (_pid, _w, price, _cap) in enumerate(pools) for t in range(T)
        )
        if best is None or cost < best:
            best = cost
    return best


@pytest.mark.parametrize("case", range(6))
def test_optimum_equals_brute_force_on_tiny_traces(case):
    rnd = random.Random(case)
    target = 1 if case < 4 else 2
    ticks = 5 if target == 1 else 3
    cold = case % 2
    offers = [spot("z1", 2.0), spot("z2", 3.0), on_demand(10.0)]
    if case % 3 == 2:
        traces = [
            trace("z1", [rnd.randint(0, 2) for _ in range(ticks)], ValueMeaning.COUNT),
            trace("z2", [rnd.randint(0, 1) for _ in range(ticks)], ValueMeaning.COUNT),
        ]
    else:
        traces = [
            trace("z1", [rnd.randint(0, 1) for _ in range(ticks)]),
            trace("z2", [rnd.randint(0, 1) for _ in range(ticks)]),
        ]
    spec = fleet_spec(target)
    replay = build_replay(offers, traces)
    got = solve(spec, replay, cold_ticks=cold)
    want = brute_force(spec, replay, cold, float(target))
    assert want is not None and got.cost == pytest.approx(want)


def test_optimum_is_a_lower_bound_of_policies_at_full_availability():
    spec = fleet_spec(2)
    a = [0] * 6 + [1] * 6 + [0] * 8
    replay = build_replay([spot("z1", 2.0), spot("z2", 3.0), on_demand(10.0)], [trace("z1", a), trace("z2", [0] * 20)])
    best = solve(spec, replay, cold_ticks=1)
    assert best.status == "optimal"
    od = run(AllOnDemand(spec, replay.offers), spec, replay, cold_ticks=1)
    cheap = run(CheapestFirst(spec, replay.offers), spec, replay, cold_ticks=1)
    assert od.at_target == 1.0 and best.cost < od.cost
    assert cheap.cost >= best.cost or cheap.at_target < 1.0
    # it moves to z2 one tick before z1 drops, so it never misses the target
    assert best.counts["gcp/r1/z2/a3-highgpu-1g/spot"][5] == 2


def test_a_budget_too_small_for_the_target_has_no_optimum():
    spec = fleet_spec(2, "budget: {max_per_hour: 3}")
    replay = build_replay([spot("z1", 2.0), on_demand(10.0)], [trace("z1", [0, 0, 0])])
    assert solve(spec, replay, cold_ticks=1).cost is None
