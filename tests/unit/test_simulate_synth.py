"""The synthetic trace generator: seeded, fitted to recorded runs, co-failures kept; and hedging."""

from __future__ import annotations

from simulate_world import fleet_spec, on_demand, spot, trace

from fleet.rebalance import ObservedInstance, decide
from fleet.rebalance.hedge import hedged, spares
from fleet.simulate import synth
from fleet.simulate.hazard import run_lengths
from fleet.simulate.tracefile import UNLIMITED


def _drops(available) -> set[int]:
    return {k for k in range(1, len(available)) if available[k - 1] and not available[k]}


def test_generated_traces_are_seeded_and_keep_each_zones_runs():
    recorded = [trace("z1", ([0] * 6 + [1] * 2 + [0] * 3 + [1]) * 10), trace("z2", [0] * 120)]
    model = synth.fit(recorded)
    a = synth.generate(model, 200, seed=7)
    assert a == synth.generate(model, 200, seed=7) and a != synth.generate(model, 200, seed=8)
    z1, z2 = a
    assert z1.name == "z1" and z1.gap_seconds == 600 and len(z1.capacity) == 200
    assert all(z2.available)  # a zone that never dropped never drops
    runs = {n for n, _ in run_lengths(z1.available)[1:-1]}  # whole runs: only recorded lengths
    assert runs <= {3, 6}
    downs = {n for n, _ in run_lengths([not x for x in z1.available])[1:-1]}
    assert downs <= {1, 2}
    assert set(z1.capacity) <= {0, UNLIMITED}


def test_zones_that_dropped_together_keep_dropping_together():
    shared = ([0] * 9 + [1]) * 10
    model = synth.fit([trace("a", shared), trace("b", shared), trace("c", ([0] * 4 + [1] + [0] * 5) * 10)])
    assert set(model.shocks) == {("a", "b")} and model.zones[0].own_drop_share == 0.0
    a, b, _c = synth.generate(model, 2000, seed=1)
    together = _drops(a.available) & _drops(b.available)
    assert together and len(together) >= 0.9 * len(_drops(a.available))


def test_count_traces_stay_within_the_asked_range():
    model = synth.fit([trace("z1", ([0] * 5 + [1]) * 10)])
    (z1,) = synth.generate(model, 300, seed=3, counts=(2, 5))
    assert {c for c in z1.capacity if c} <= {2, 3, 4, 5} and 0 in z1.capacity


def test_hedge_plans_spares_no_zone_holds_more_than_they_cover():
    spec = fleet_spec(
        4, "rebalance: {hedge: true, cold_start_seconds: 3600}\ndiversification: {max_pool_share: 1, max_zone_share: 1}"
    )
    offers = [
        spot("z1", 2.0, rate=0.5),
        spot("z2", 2.1, rate=0.5),
        spot("z3", 2.2, rate=0.5),
        spot("z4", 2.3, rate=0.5),
        spot("z5", 2.4, rate=0.5),
        on_demand(10.0),
    ]
    running = [
        ObservedInstance(
            id=f"i{k}",
            pool=offers[0].pool.id,
            market=offers[0].market,
            accelerator="H100",
            gpus=1,
            price_per_hour=2.0,
            launched_at=0.0,
        )
        for k in range(4)
    ]
    assert spares(spec, offers, running) == 2  # 4 nodes x 0.5/h x 1 h
    assert hedged(spec, 2).diversification.max_zone_share == 2 / 6
    d = decide(spec, offers, [], [], 0.0)
    counts: dict[str, int] = {}
    for launch in d.launches:
        counts[launch.pool] = counts.get(launch.pool, 0) + launch.count
    assert sum(counts.values()) == 5 and max(counts.values()) <= 1  # nothing runs yet: one spare node
