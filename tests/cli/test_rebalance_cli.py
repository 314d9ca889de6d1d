"""``fleet rebalance`` end to end on the local cloud, as a real subprocess: back at target after
preemptions, dry runs, a busy fleet, two rebalancers racing, kill -9 mid-pass, early warnings.
Every test runs twice: with the state in SQLite and in a real PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli.world import World

from fleet.agent.notice import Notice
from fleet.agent.report import report_notice
from fleet.state import LaunchStatus, StateStore, open_store

NODES = 8  # the chaos spec: 64 weighted GPUs in nodes of 8 H100


class StateWorld(World):
    """The CLI world with its state store at ``url`` (an SQLite file or a PostgreSQL database)."""

    def __init__(self, root: Path, url: str):
        super().__init__(root)
        self.url = url

    def env(self, **extra: str) -> dict[str, str]:
        return super().env(SPOTFLEET_STATE=self.url, **extra)

    def store(self) -> StateStore:
        return open_store(self.url, create=False)


@pytest.fixture
def world(tmp_path: Path, state_url: str) -> StateWorld:
    return StateWorld(tmp_path, state_url)


def up(world: World) -> None:
    report = world.fleet_json("up", str(world.spec()), "--yes")
    assert report["ok"] and sum(world.alive("chaos").values()) == NODES


def lose_spot(world: World, n: int = 2, *, cli: bool = False) -> list[str]:
    """Preempt ``n`` spot nodes, then let five minutes pass (the market may take more; within the
    default 10-minute back-off, which counts from the preemption itself, as the provider dates it),
    through the CLI (``fleet local preempt``/``advance``) or, quicker, the local cloud's own API."""
    spot = sorted(i.id for i in world.created("chaos") if i.state.alive and i.pool.market.value == "spot")[:n]
    for iid in spot:
        if cli:
            proc = world.fleet("local", "preempt", iid)
            assert proc.returncode == 0, proc.stderr
        else:
            world.cloud.preempt(iid)
    if cli:
        proc = world.fleet("local", "advance", "5m")
        assert proc.returncode == 0, proc.stderr
    else:
        world.cloud.advance(300)
    return spot


def assert_at_target_without_duplicates(world: World) -> None:
    created = world.created("chaos")
    alive = [i for i in created if i.state.alive]
    lost = [i for i in created if i.state.value == "preempted"]
    assert len(alive) == NODES, sorted((i.pool.id, i.state.value) for i in created)
    # nothing launched beyond what replaced a loss; nothing terminated as surplus
    assert len(created) == NODES + len(lost), sorted((i.pool.id, i.state.value) for i in created)
    store = world.store()
    try:
        assert {r.id for r in store.instances("chaos", alive_only=True)} == {i.id for i in alive}
        assert store.lock_holder("chaos") is None
        assert store.launches("chaos", status=LaunchStatus.REQUESTED) == []
    finally:
        store.close()


def test_preempted_fleet_is_back_at_target_after_one_pass_and_history_shows_each_action(world: World):
    up(world)
    lost = lose_spot(world, cli=True)
    lost_pools = {i.pool.id for i in world.created("chaos") if i.id in lost}
    report = world.fleet_json("rebalance", "chaos")
    assert report["at_target"] and report["running_weighted_gpus"] == 64
    launches = [r for r in report["results"] if r["kind"] == "launch"]
    assert launches and all(r["done"] and r["reason"] == "replace-lost" for r in launches)
    assert not {r["pool"] for r in launches} & lost_pools  # the pools that just interrupted are avoided
    assert_at_target_without_duplicates(world)
    history = world.fleet_json("history", "chaos", "--limit", "0")
    recorded = [e for e in history["events"] if e["kind"] == "rebalance"]
    assert len(recorded) == len(report["results"]) and all(e["detail"]["done"] for e in recorded)
    assert history["status"] == "up"
    again = world.fleet("rebalance", "chaos")
    assert again.returncode == 0 and "nothing to do" in again.stdout, again.stdout + again.stderr


def test_dry_run_prints_actions_and_changes_nothing(world: World):
    up(world)
    lose_spot(world)
    before = world.created("chaos")
    proc = world.fleet("rebalance", "chaos", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "would launch" in proc.stdout
    assert world.created("chaos") == before
    report = world.fleet_json("rebalance", "chaos", "--dry-run")
    assert report["dry_run"] and report["decision"]["actions"] and report["results"] == []
    assert not [e for e in world.fleet_json("history", "chaos", "--limit", "0")["events"] if e["kind"] == "rebalance"]


def test_up_after_a_rebalance_keeps_the_replacements_and_launches_nothing(world: World):
    """A rerun of `fleet up` after the rebalancer replaced preempted nodes in other pools used to
    terminate those fresh replacements as surplus and relaunch in the pools just preempted."""
    up(world)
    lose_spot(world, 3)
    report = world.fleet_json("rebalance", "chaos")
    assert report["at_target"], report
    before = {i.id for i in world.created("chaos") if i.state.alive}
    assert len(before) == NODES
    again = world.fleet_json("up", str(world.spec()), "--yes")
    assert again["ok"] and again["terminated"] == [] and again["launched"] == []
    assert {i.id for i in world.created("chaos") if i.state.alive} == before


def test_a_busy_fleet_exits_75_for_cron(world: World):
    up(world)
    store = world.store()
    try:
        with store.lock("chaos", "up"):
            proc = world.fleet("rebalance", "chaos")
    finally:
        store.close()
    assert proc.returncode == 75 and "busy" in proc.stderr and "Traceback" not in proc.stderr


def test_unknown_fleet_is_one_clear_line(world: World):
    up(world)
    proc = world.fleet("rebalance", "nope")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "no fleet named 'nope'" in proc.stderr


def test_two_rebalancers_racing_never_double_launch(world: World):
    up(world)
    lose_spot(world, 3)
    racers = [world.spawn("rebalance", "chaos") for _ in range(2)]
    codes = sorted(p.wait(timeout=120) for p in racers)
    assert set(codes) <= {0, 75}, [p.stderr.read() for p in racers]
    assert_at_target_without_duplicates(world)


CRASH_STEPS = ["rebalance-decided", "launch-recorded", "launch-sent", "instances-recorded", "surplus-done"]


@pytest.mark.parametrize("step", CRASH_STEPS)
def test_killed_mid_pass_a_rerun_converges(world: World, step: str):
    up(world)
    lose_spot(world)
    crashed = world.fleet("rebalance", "chaos", env=world.env(SPOTFLEET_TEST_CRASH_AT=step))
    assert crashed.returncode == 137, crashed.stdout + crashed.stderr
    rerun = world.fleet_json("rebalance", "chaos")
    assert rerun["at_target"], rerun
    assert_at_target_without_duplicates(world)


def test_a_rebalance_recommendation_is_replaced_before_the_node_dies(world: World):
    up(world)
    warned = min((i for i in world.created("chaos") if i.pool.market.value == "spot"), key=lambda i: i.id)
    assert report_notice(world.url, "chaos", warned.id, Notice(kind="rebalance", deadline=0.0, cloud="aws"))
    first = world.fleet_json("rebalance", "chaos")
    launches = [r for r in first["results"] if r["kind"] == "launch"]
    assert [r["reason"] for r in launches] == ["early-replace"] and launches[0]["pool"] != warned.pool.id
    assert world.cloud.instance_state(warned.id).alive  # the warned node still works meanwhile
    second = world.fleet_json("rebalance", "chaos")
    assert [(r["kind"], r["instance"], r["reason"], r["done"]) for r in second["results"]] == [
        ("terminate", warned.id, "replaced-early", True)
    ]
    assert sum(world.alive("chaos").values()) == NODES


def test_a_fleet_taken_down_stays_down(world: World):
    up(world)
    assert world.fleet("down", "chaos", "--yes").returncode == 0
    proc = world.fleet("rebalance", "chaos")
    assert proc.returncode == 0 and "is down: nothing to do" in proc.stdout, proc.stdout + proc.stderr
    assert world.alive("chaos") == {}
