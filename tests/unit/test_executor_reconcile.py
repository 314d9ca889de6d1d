"""Reconciling the record with the providers: unreachable providers are left alone, notices
date preemptions, instances found by tag are recorded."""

from __future__ import annotations

import pytest
from support.executor_world import make_plan

from fleet.errors import TransientProviderError
from fleet.model import LaunchRequest, fleet_tags
from fleet.provisioning.executor import apply
from fleet.provisioning.reconcile import observe, sync
from fleet.state import EventKind


class Unreachable:
    """A provider whose API is down for listing (as during a regional outage); the rest works."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name

    def list_instances(self, fleet):
        raise TransientProviderError(self.name, "503 Service Unavailable", code="ServiceUnavailable")

    def __getattr__(self, attr):
        return getattr(self.inner, attr)


def test_an_unreachable_provider_is_neither_ended_nor_launched_into(cloud, providers, store, pools):
    plan = make_plan(pools, [1, 1, 1, 1, 1, 1])
    apply(plan, providers, store)
    gcp_ids = {r.id for r in store.instances("demo") if r.provider == "gcp"}
    assert gcp_ids
    for inst in cloud.all_instances(alive_only=True):
        if inst.pool.provider == "gcp":
            cloud.preempt(inst.id)
    down = {**providers, "gcp": Unreachable(providers["gcp"])}
    report = apply(plan, down, store)
    assert not report.ok and report.launched == []
    assert any(n.startswith("gcp: could not list instances") for n in report.notes)
    assert {r.id for r in store.instances("demo", alive_only=True) if r.provider == "gcp"} == gcp_ids
    assert [i for i in cloud.all_instances(alive_only=True) if i.pool.provider == "gcp"] == []
    # once gcp answers again, the loss is recorded and refilled
    again = apply(plan, providers, store)
    assert again.ok and {i.pool.provider for i in again.launched} == {"gcp"}
    assert {e.instance_id for e in store.events("demo", kinds={EventKind.PREEMPTED})} == gcp_ids


@pytest.mark.parametrize("shape", ["cloud", "local"])
def test_a_notice_deadline_dates_the_preemption(cloud, providers, store, pools, shape):
    report = apply(make_plan(pools[:1], [2]), providers, store)
    victim, other = report.launched
    cloud.advance(600)
    deadline = cloud.now() + 120
    if shape == "cloud":  # a real cloud's notice: the deadline is on the wall clock, which is its clock
        detail = {"cloud": "aws", "kind": "terminate", "deadline": deadline}
    else:  # the local cloud's notice file: its own (simulated) time, and the wall clock's
        detail = {
            "cloud": "local",
            "kind": "terminate",
            "deadline": 1.0e9,
            "detail": {"action": "terminate", "time": deadline, "wall_deadline": 1.0e9},
        }
    store.record_event("demo", EventKind.NOTICE, instance_id=victim.id, detail=detail)
    cloud.advance(120)
    cloud.preempt(victim.id)
    cloud.preempt(other.id)
    taken = cloud.now()
    cloud.advance(900)
    result = sync(store, observe(providers, "demo"))
    assert sorted(r.id for r, _ in result.ended) == sorted([victim.id, other.id])
    ended = {r.id: r.ended_at for r in store.instances("demo")}
    assert ended[victim.id] == pytest.approx(deadline, abs=1)
    assert ended[other.id] == pytest.approx(taken, abs=1)  # the provider says when, not when we looked


def test_a_rebalance_recommendation_dates_nothing(cloud, providers, store, pools):
    # on the on-demand pool: the local cloud starts at the wall-clock time, so a spot pool's recorded
    # trace could take the node back during the 25 simulated minutes, depending on the time of day
    report = apply(make_plan(pools[5:], [1]), providers, store)
    (victim,) = report.launched
    cloud.advance(600)
    early = cloud.now() + 120
    store.record_event(
        "demo", EventKind.NOTICE, instance_id=victim.id, detail={"cloud": "aws", "kind": "rebalance", "deadline": early}
    )
    cloud.advance(900)  # the instance lived on well past the advice's window
    cloud.preempt(victim.id)
    taken = cloud.now()
    result = sync(store, observe(providers, "demo"))
    assert [r.id for r, _ in result.ended] == [victim.id]
    # dated when the cloud took it, not by the advice's window (epoch times: an absolute tolerance)
    assert {r.id: r.ended_at for r in store.instances("demo")}[victim.id] == pytest.approx(taken, abs=1)


def test_instances_found_by_tag_are_recorded_once(cloud, providers, store, pools):
    offer = pools[0]
    aws = providers[offer.pool.provider]
    made = aws.launch(
        LaunchRequest(fleet="demo", offer=offer, count=2, token="by-hand", tags=fleet_tags("demo", offer.pool, "p0"))
    )
    aws.launch(LaunchRequest(fleet="other", offer=offer, count=1, token="theirs", tags=fleet_tags("other", offer.pool)))
    cloud.launch_foreign(offer.pool.id, 1)
    first = sync(store, observe(providers, "demo"))
    assert sorted(i.id for i in first.discovered) == sorted(i.id for i in made.instances)
    assert sync(store, observe(providers, "demo")).discovered == []
    rows = store.instances("demo")
    assert {r.plan_id for r in rows} == {"p0"} and len(rows) == 2
    assert len(store.events("demo", kinds={EventKind.DISCOVERED})) == 2
