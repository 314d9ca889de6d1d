"""Failover: the executor blocks what failed and moves only the shortfall, with the real planner."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.catalog import Catalog, filter_for_spec
from fleet.planning.planner import plan as make_plan
from fleet.provisioning.executor import apply
from fleet.spec import parse_spec
from fleet.state import EventKind, open_store
from providers.base import OfferQuery
from providers.local import LocalCloud

SPEC = """
name: failover
backend: local
capacity:
  gpus: 32
  accelerators: [H100]
  gpus_per_node: {min: 8, max: 8}
  on_demand_gpus: 8
diversification:
  min_pools: 2
  max_pool_share: 0.5
"""


@pytest.fixture
def world(tmp_path: Path):
    spec = parse_spec(SPEC)
    cloud = LocalCloud.open(tmp_path / "cloud", time_scale=0, seed=3)
    providers = {name: cloud.provider(name) for name in cloud.provider_names()}
    offers, _ = Catalog(providers=providers).offers(OfferQuery(accelerators=("H100",)))
    offers = filter_for_spec(offers, spec)
    store = open_store(str(tmp_path / "state.db"))
    yield spec, cloud, providers, offers, store
    store.close()


def _replanner(spec, offers):
    return lambda current, blocked: make_plan(spec, offers, current=current, blocked=blocked)


def _alive(cloud, fleet):
    out: dict[str, int] = {}
    for i in cloud.all_instances(alive_only=True):
        if i.fleet == fleet:
            out[i.pool.id] = out.get(i.pool.id, 0) + 1
    return out


def test_capacity_failure_moves_only_the_shortfall(world):
    spec, cloud, providers, offers, store = world
    first = make_plan(spec, offers)
    spot_pools = [a.offer.pool.id for a in first.allocations if a.offer.market.value == "spot"]
    dead = spot_pools[0]
    cloud.set_capacity(dead, 0)
    report = apply(first, providers, store, replan=_replanner(spec, offers))
    assert report.ok, report.to_dict()
    assert report.rounds == 2 and report.blocked == [(dead, "capacity")]
    assert dead not in report.plan.counts()
    # what launched in round one stays where it is: only the dead pool's share moved
    for pool, n in first.counts().items():
        if pool != dead:
            assert report.plan.counts().get(pool, 0) >= n
    assert _alive(cloud, "failover") == report.plan.counts()
    assert report.terminated == []
    assert report.plan.totals.weighted_gpus >= spec.capacity.gpus
    assert [e.pool for e in store.events("failover", kinds={EventKind.BLOCKED})] == [dead]


def test_quota_failure_blocks_the_region_for_the_replan(world):
    spec, cloud, providers, offers, store = world
    first = make_plan(spec, offers)
    victim = next(a.offer.pool for a in first.allocations if a.offer.market.value == "spot")
    region = f"{victim.provider}/{victim.region}"
    cloud.inject_fault(region, "quota", 50)
    report = apply(first, providers, store, replan=_replanner(spec, offers))
    assert report.ok, report.to_dict()
    assert (region, "quota") in report.blocked
    assert not any(p.startswith(region + "/") for p in report.plan.counts())
    assert _alive(cloud, "failover") == report.plan.counts()


def test_when_every_provider_refuses_it_ends_short_and_says_why(world):
    spec, cloud, providers, offers, store = world
    spec = parse_spec(SPEC + "providers: [aws, gcp]\n")
    offers = filter_for_spec(offers, spec)
    first = make_plan(spec, offers)
    for name in ("aws", "gcp"):
        cloud.inject_fault(name, "auth", 1000)
    report = apply(first, providers, store, replan=_replanner(spec, offers))
    assert not report.ok and report.launched == []
    assert report.blocked == [("aws", "auth"), ("gcp", "auth")]
    assert report.plan == first and report.missing == first.counts()
    assert [n for n in report.notes if n.startswith("no pool left to move the shortfall to")]
