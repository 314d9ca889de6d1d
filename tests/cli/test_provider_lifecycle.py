"""The CLI lifecycle every provider goes through, as real ``fleet`` subprocesses against the
provider's fake (``backend: cloud``): ``up`` meets the spec, a rerun creates nothing, ``status``
counts the fleet, a kill -9 mid-up converges on rerun without duplicates, a resource that is not
the fleet's is never touched, and ``down`` leaves nothing. Each case runs once per world of
``tests/cli/lifecycle_worlds.py``; a world's ``check_*`` hooks add what only its provider has.
Provider-specific cases stay in the per-provider modules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli.lifecycle_world import LifecycleWorld
from cli.lifecycle_worlds import EXTRA_FIXTURES, WORLDS

from fleet.state import LaunchStatus, open_store

CRASHES = [(name, point) for name, (cls, _) in WORLDS.items() for point in cls.crash_points]


def _world(request: pytest.FixtureRequest, tmp_path: Path, name: str) -> LifecycleWorld:
    cls, server = WORLDS[name]
    if name == "oci":
        pytest.importorskip("oci")
    servers = [request.getfixturevalue(f) for f in (server, *EXTRA_FIXTURES.get(name, ()))]
    return cls(tmp_path, *servers)


@pytest.mark.parametrize("cli_world", list(WORLDS))
def test_up_meets_the_spec_rerun_is_idempotent_and_down_ends_everything(request, tmp_path, cli_world):
    world = _world(request, tmp_path, cli_world)
    world.before_up()
    up = world.fleet("up", str(world.spec), "--yes", "--json")
    assert up.returncode == 0, up.stderr
    report = json.loads(up.stdout)
    planned = sum(report["desired"].values())
    assert report["ok"]
    world.check_planned(planned)
    ours = world.ours()
    assert len(ours) == planned
    world.check_up(report, ours)
    again = world.fleet_json("up", str(world.spec), "--yes")
    assert again["ok"] and again["launched"] == [] and again["terminated"] == []
    assert len(world.ours(live=False)) == planned  # nothing created twice
    world.check_rerun(again, report)
    world.check_status(world.fleet_json("status", world.fleet_name), planned)
    down_run = world.fleet("down", world.fleet_name, "--yes", "--json")
    assert down_run.returncode == 0, down_run.stderr
    down = json.loads(down_run.stdout)
    assert sorted(down["terminated"]) == world.ids(ours) and down["remaining"] == []
    assert world.ours() == [] and world.foreign_alive()
    world.check_down(down, ours, [up, down_run])


@pytest.mark.parametrize(("cli_world", "point"), CRASHES)
def test_killed_mid_up_a_rerun_converges_without_duplicates(request, tmp_path, cli_world, point):
    world = _world(request, tmp_path, cli_world)
    crashed = world.fleet("up", str(world.spec), "--yes", SPOTFLEET_TEST_CRASH_AT=point)
    assert crashed.returncode == 137, crashed.stderr
    rerun = world.fleet_json("up", str(world.spec), "--yes")
    assert rerun["ok"], rerun
    planned = sum(rerun["desired"].values())
    world.check_planned(planned)
    assert len(world.ours()) == planned and len(world.ours(live=False)) == planned
    world.check_rerun(rerun)
    store = open_store(str(world.home / "state.db"), create=False)
    try:
        assert {r.id for r in store.instances(world.fleet_name, alive_only=True)} == set(world.ids(world.ours()))
        assert store.launches(world.fleet_name, status=LaunchStatus.REQUESTED) == []
    finally:
        store.close()
    world.fleet_json("down", world.fleet_name, "--yes")
    assert world.ours() == [] and world.foreign_alive()
