"""The executor against the real local cloud (frozen clock: no preemption unless a test asks).

Plans here are built by hand from the cloud's own offers so each test controls exactly
which pools and counts are wanted; re-planning with the real planner is tested in
test_executor_replan.py.
"""

from __future__ import annotations

import pytest
from support.executor_world import alive, make_plan

from fleet.model import fleet_tags
from fleet.provisioning.executor import apply, launch_token
from fleet.state import EventKind, LaunchStatus


def test_launches_every_pool_and_a_rerun_changes_nothing(cloud, providers, store, pools):
    plan = make_plan(pools, [2, 3, 1, 2, 2, 4])
    seen = []
    report = apply(plan, providers, store, progress=seen.append)
    assert report.ok and report.missing == {} and len(report.launched) == 14
    assert alive(cloud) == plan.counts() == report.counts
    assert {p.pool for p in seen if p.kind == "launched"} == set(plan.counts())
    assert sorted(r.id for r in store.instances("demo", alive_only=True)) == sorted(i.id for i in report.launched)
    assert len(store.events("demo", kinds={EventKind.LAUNCHED})) == 14
    assert all(launch.status == LaunchStatus.DONE for launch in store.launches("demo"))
    assert store.latest_plan("demo", applied_only=True) == plan

    again = apply(plan, providers, store)
    assert again.ok and again.launched == [] and again.terminated == []
    assert alive(cloud) == plan.counts()
    assert len(store.launches("demo")) == 6


def test_launch_tokens_are_deterministic_and_distinct():
    a = launch_token("demo", "p1", "aws/r/z/t/spot", 1)
    assert a == launch_token("demo", "p1", "aws/r/z/t/spot", 1) and len(a) <= 64 and a.isascii()
    assert (
        len(
            {
                a,
                launch_token("demo", "p1", "aws/r/z/t/spot", 2),
                launch_token("demo", "p2", "aws/r/z/t/spot", 1),
                launch_token("other", "p1", "aws/r/z/t/spot", 1),
            }
        )
        == 4
    )


def test_surplus_of_this_fleet_only_is_terminated(cloud, providers, store, pools):
    big = make_plan(pools[:2], [4, 2])
    apply(big, providers, store)
    foreign = cloud.launch_foreign(pools[0].pool.id, 2)
    other = apply(make_plan(pools[:1], [2], fleet="other"), providers, store)
    small = make_plan(pools[:1], [1])
    report = apply(small, providers, store)
    assert report.ok and len(report.terminated) == 5
    assert alive(cloud) == {pools[0].pool.id: 1}
    assert alive(cloud, "other") == {pools[0].pool.id: 2}
    still = {i.id for i in cloud.all_instances(alive_only=True)}
    assert {i.id for i in foreign} <= still and {i.id for i in other.launched} <= still
    ended = {r.id: r.end_reason for r in store.instances("demo") if not r.alive}
    assert sorted(ended) == sorted(report.terminated) and set(ended.values()) == {EventKind.TERMINATED}


def test_a_launch_recorded_but_never_sent_is_replayed_with_its_token(cloud, providers, store, pools):
    plan = make_plan(pools[:2], [3, 2])
    pool = pools[0].pool.id
    # what a crash right after recording leaves behind: a REQUESTED launch, nothing at the provider
    pending = store.begin_launch("demo", plan.id, pool, 3, lambda seq: launch_token("demo", plan.id, pool, seq))
    report = apply(plan, providers, store)
    assert report.ok and alive(cloud) == plan.counts()
    tokens = {i.id: i for i in cloud.all_instances() if i.pool.id == pool}
    assert len(tokens) == 3
    assert [launch.status for launch in store.launches("demo") if launch.pool == pool] == [LaunchStatus.DONE]
    assert store.launches("demo")[0].token == pending.token


def test_a_launch_sent_but_not_recorded_is_not_duplicated(cloud, providers, store, pools):
    plan = make_plan(pools[:2], [3, 2])
    pool = pools[0]
    # what a crash right after the provider call leaves: instances exist, the launch row says REQUESTED
    pending = store.begin_launch(
        "demo", plan.id, pool.pool.id, 3, lambda seq: launch_token("demo", plan.id, pool.pool.id, seq)
    )
    from fleet.model import LaunchRequest

    made = providers[pool.pool.provider].launch(
        LaunchRequest(
            fleet="demo", offer=pool, count=3, token=pending.token, tags=fleet_tags("demo", pool.pool, plan.id)
        )
    )
    assert len(made.instances) == 3
    report = apply(plan, providers, store)
    assert report.ok and alive(cloud) == plan.counts()
    assert len([i for i in cloud.all_instances() if i.pool.id == pool.pool.id]) == 3
    discovered = {e.instance_id for e in store.events("demo", kinds={EventKind.DISCOVERED})}
    assert discovered == {i.id for i in made.instances}
    # the pool is full, so the unfinished launch is closed without another call
    assert [launch.status for launch in store.launches("demo") if launch.pool == pool.pool.id] == [
        LaunchStatus.ABANDONED
    ]


def test_capacity_shortfall_blocks_the_pool_and_reports_it(cloud, providers, store, pools):
    plan = make_plan(pools[:3], [3, 3, 1])
    short = pools[1].pool.id
    cloud.set_capacity(short, 1)
    report = apply(plan, providers, store)
    assert not report.ok and report.missing == {short: 2}
    assert report.missing_weighted_gpus == 2 * pools[1].gpus
    assert [(f.pool, f.error_kind, len(f.instances)) for f in report.failures] == [(short, "capacity", 1)]
    assert report.blocked == [(short, "capacity")]
    (block,) = store.blocks()
    assert block.prefix == short and block.until == pytest.approx(providers[pools[1].pool.provider].now() + 180, abs=1)
    assert alive(cloud) == {pools[0].pool.id: 3, short: 1, pools[2].pool.id: 1}


@pytest.mark.parametrize("kind,blocked", [("quota", 2), ("auth", 1)])
def test_quota_blocks_the_region_and_auth_the_provider(cloud, providers, store, pools, kind, blocked):
    plan = make_plan(pools[:1] + pools[3:4], [2, 2])
    pool = pools[3].pool
    cloud.inject_fault(pool.id, kind, 1)
    report = apply(plan, providers, store)
    prefix = "/".join(pool.id.split("/")[:blocked])
    assert report.blocked == [(prefix, kind)]
    assert [b.prefix for b in store.blocks()] == [prefix]
    assert report.missing == {pool.id: 2} and alive(cloud) == {pools[0].pool.id: 2}
    assert [launch.status for launch in store.launches("demo") if launch.pool == pool.id] == [LaunchStatus.FAILED]


@pytest.mark.parametrize("kind,word", [("throttle", "rate-limit"), ("server-error", "transient")])
def test_throttling_and_5xx_are_reported_and_replayed_next_run(cloud, providers, store, pools, kind, word):
    plan = make_plan(pools[:2], [2, 2])
    pool = pools[1].pool.id
    cloud.inject_fault(pool, kind, 10 if kind == "throttle" else 1)  # throttle: more than the adapter retries
    report = apply(plan, providers, store)
    assert [f.error_kind for f in report.failures] == [word]
    assert report.blocked == [] and len(report.notes) == 1 and pool in report.notes[0]
    (pending,) = store.launches("demo", status=LaunchStatus.REQUESTED)
    cloud.clear_faults()
    again = apply(plan, providers, store)
    assert again.ok and alive(cloud) == plan.counts()
    assert {i.tags["spotfleet:pool"] for i in again.launched} == {pool}
    assert [launch.token for launch in store.launches("demo") if launch.pool == pool] == [pending.token]


def test_preempted_instances_are_recorded_and_replaced(cloud, providers, store, pools):
    plan = make_plan(pools[:2], [2, 2])
    first = apply(plan, providers, store)
    victim = first.launched[0]
    cloud.preempt(victim.id)
    report = apply(plan, providers, store)
    assert report.ok and len(report.launched) == 1 and report.launched[0].pool == victim.pool
    (rec,) = [r for r in store.instances("demo") if r.id == victim.id]
    assert rec.end_reason == EventKind.PREEMPTED and rec.ended_at is not None
    assert [e.instance_id for e in store.events("demo", kinds={EventKind.PREEMPTED})] == [victim.id]
