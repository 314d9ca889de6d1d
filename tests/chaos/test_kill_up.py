"""kill -9 `fleet up` (and `fleet down`) mid-flight, rerun, and check nothing is duplicated,
orphaned or lost.

Deterministic points: ``SPOTFLEET_TEST_CRASH_AT=<n>`` makes the real process ``os._exit``
at its n-th crash point (store opened, fleet saved, and per pool: launch recorded, launch
sent, instances recorded, launch finished, then round done and surplus done). The chaos
spec's plan has five pools, so a run passes 24 points and every one is tried. Kills from
outside at varied delays cover whatever lies between them.
"""

from __future__ import annotations

import signal
import time

import pytest
from cli.world import World

from fleet.state import LaunchStatus

CRASH_POINTS = 24


def assert_converged(world: World, report: dict, fleet: str = "chaos") -> None:
    assert report["ok"], report
    assert world.alive(fleet) == report["desired"]
    created = world.created(fleet)
    # no duplicate: nothing was ever launched beyond the plan (no surplus to terminate)
    assert len(created) == sum(report["desired"].values()), [(i.id, i.state.value) for i in created]
    assert all(i.state.alive for i in created)
    store = world.store()
    try:
        recorded = {r.id for r in store.instances(fleet, alive_only=True)}
        assert recorded == {i.id for i in created}  # no orphan, no phantom
        assert store.lock_holder(fleet) is None
        assert store.launches(fleet, status=LaunchStatus.REQUESTED) == []
        assert store.get_fleet(fleet).status == "up"
    finally:
        store.close()


def test_the_chaos_run_has_exactly_the_crash_points_swept(world: World):
    spec = str(world.spec())
    beyond = world.fleet("up", spec, "--yes", "--json", env=world.env(SPOTFLEET_TEST_CRASH_AT=str(CRASH_POINTS + 1)))
    assert beyond.returncode == 0, beyond.stderr
    dry = world.fleet_json("up", spec, "--dry-run")
    assert len(dry["plan"]["allocations"]) == 5 and dry["changes"] == {}


@pytest.mark.parametrize("point", range(1, CRASH_POINTS + 1))
def test_killed_at_each_step_a_rerun_converges(world: World, point: int):
    spec = str(world.spec())
    crashed = world.fleet("up", spec, "--yes", env=world.env(SPOTFLEET_TEST_CRASH_AT=str(point)))
    assert crashed.returncode == 137, crashed.stderr
    rerun = world.fleet_json("up", spec, "--yes")
    assert_converged(world, rerun)


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory) -> float:
    """Seconds a whole `fleet up` of the chaos spec takes on this machine (sets the kill delays)."""
    twin = World(tmp_path_factory.mktemp("twin"))
    started = time.monotonic()
    assert twin.fleet("up", str(twin.spec()), "--yes").returncode == 0
    return time.monotonic() - started


@pytest.mark.parametrize("fraction", [0.45, 0.6, 0.7, 0.8, 0.9, 1.0])
def test_killed_from_outside_at_varied_delays_a_rerun_converges(world: World, whole_run: float, fraction: float):
    spec = str(world.spec())
    proc = world.spawn("up", spec, "--yes")
    time.sleep(whole_run * fraction)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode in (-signal.SIGKILL, 0)
    rerun = world.fleet_json("up", spec, "--yes")
    assert_converged(world, rerun)


def test_down_killed_after_terminating_is_finished_by_a_rerun(world: World):
    spec = str(world.spec())
    assert world.fleet_json("up", spec, "--yes")["ok"]
    crashed = world.fleet("down", "chaos", "--yes", env=world.env(SPOTFLEET_TEST_CRASH_AT="terminate-sent"))
    assert crashed.returncode == 137
    rerun = world.fleet_json("down", "chaos", "--yes")
    assert rerun["remaining"] == [] and world.alive("chaos") == {}
    store = world.store()
    try:
        assert store.get_fleet("chaos").status == "down"
        assert store.instances("chaos", alive_only=True) == []
    finally:
        store.close()
