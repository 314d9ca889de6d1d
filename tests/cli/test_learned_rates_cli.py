"""`fleet plan` and `fleet up` weigh pools with the interruption rates this fleet has seen
(the rebalancer's Gamma-Poisson update), not only the catalog's prior: the three commands
agree on what a pool costs. Real subprocesses against the local cloud."""

from __future__ import annotations

from pathlib import Path

from cli.world import World


def _pool_id(pool: dict) -> str:
    return "/".join(pool[k] for k in ("provider", "region", "zone", "instance_type", "market"))


def _rates(plan: dict) -> dict[str, tuple[float, str]]:
    return {
        _pool_id(a["offer"]["pool"]): (a["offer"]["interruptions_per_hour"], a["offer"]["interruption_source"])
        for a in plan["allocations"]
    }


def test_a_pool_that_lost_nodes_is_priced_by_what_the_fleet_saw(tmp_path: Path):
    world = World(tmp_path)
    spec = str(world.spec())
    before = world.fleet_json("plan", spec)
    assert world.fleet_json("up", spec, "--yes")["ok"]
    spot = sorted((i for i in world.created("chaos") if i.pool.market.value == "spot"), key=lambda i: i.pool.id)
    victim_pool = spot[0].pool.id
    prior = _rates(before)[victim_pool]
    assert prior[1] != "observed"
    world.cloud.advance(3600)  # the simulated market may take some of them back by itself meanwhile
    alive = {i.id for i in world.cloud.all_instances(alive_only=True)}
    for inst in spot:
        if inst.pool.id == victim_pool and inst.id in alive:
            world.cloud.preempt(inst.id)
    world.cloud.advance(60)
    assert world.fleet_json("up", spec, "--yes")["ok"]  # records the losses, refills

    after = world.fleet_json("plan", spec)
    rates = _rates(after)
    assert any(src == "observed" for _, src in rates.values()), "no pool is priced from the fleet's own record"
    if victim_pool in rates:  # still chosen: priced dearer than the prior said
        assert rates[victim_pool][1] == "observed" and rates[victim_pool][0] > prior[0]
    # else: dropped, the losses made it the dearer choice


def test_a_fresh_fleet_keeps_the_catalog_rates(tmp_path: Path):
    world = World(tmp_path)
    plan = world.fleet_json("plan", str(world.spec()))
    assert {src for _, src in _rates(plan).values()} <= {
        "provider-prior",
        "trace",
        "none",
        "spot-advisor",
        "placement-score",
    }


def test_offers_for_a_spec_are_what_plan_weighs(tmp_path: Path):
    world = World(tmp_path)
    spec = str(world.spec())
    listed = world.fleet_json("offers", "--spec", spec, "--limit", "0")
    assert listed["source"] == "local" and listed["total"] == len(listed["offers"]) > 0
    pools = {_pool_id(o["pool"]) for o in listed["offers"]}
    plan = world.fleet_json("plan", spec)
    assert set(_rates(plan)) <= pools  # every planned pool is among them
    assert {o["accelerator"] for o in listed["offers"]} == {"H100"}  # the spec's accelerators only
    spot_gcp = world.fleet_json("offers", "--spec", spec, "--spot", "-p", "gcp", "--limit", "0")
    assert spot_gcp["offers"] and {(o["pool"]["provider"], o["pool"]["market"]) for o in spot_gcp["offers"]} == {
        ("gcp", "spot")
    }
