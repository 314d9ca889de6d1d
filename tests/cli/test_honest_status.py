"""`fleet status` says what is true, whatever happened to the fleet: a finished `up`, an `up`
killed or interrupted half-way, a local cloud reset under it; and Ctrl-C during `up` says
that rerunning is safe."""

from __future__ import annotations

import signal

from cli.world import World

from fleet.errors import StateError


def _status(world: World, name: str) -> tuple[int, dict, str]:
    import json

    data = world.fleet("status", name, "--json")
    human = world.fleet("status", name)
    assert data.returncode == human.returncode
    return data.returncode, json.loads(data.stdout), human.stdout


def test_an_up_killed_after_launching_everything_reads_up_not_planned(world: World):
    spec = world.spec("killed")
    proc = world.fleet("up", str(spec), "--yes", env=world.env(SPOTFLEET_TEST_CRASH_AT="surplus-done"))
    assert proc.returncode == 137
    assert world.store().get_fleet("killed").status == "planned"
    code, data, human = _status(world, "killed")
    assert code == 0 and data["status"] == "up" and data["running"] == data["planned"] == 8
    assert "killed: up, 8 of 8 planned instances running" in human


def test_an_up_killed_before_its_plan_was_recorded_stays_planned(world: World):
    spec = world.spec("early")
    assert world.fleet("up", str(spec), "--yes", env=world.env(SPOTFLEET_TEST_CRASH_AT="fleet-saved")).returncode == 137
    code, data, human = _status(world, "early")
    assert code == 0 and data["status"] == "planned" and data["running"] == 0
    assert "early: planned, 0 instance(s) running" in human and "no applied plan recorded" in human


def test_a_fleet_whose_cloud_was_reset_is_short_and_check_exits_3(world: World):
    spec = world.spec("wiped")
    assert world.fleet_json("up", str(spec), "--yes")["ok"]
    assert _status(world, "wiped")[0] == 0
    assert world.fleet("local", "reset", "--yes").returncode == 0
    code, data, _ = _status(world, "wiped")
    assert code == 0 and data["status"] == "short" and data["running"] == 0 and data["recorded_status"] == "up"
    assert world.fleet("status", "wiped", "--check").returncode == 3  # for probes and scripts


def _launching(world: World, fleet: str) -> bool:
    """True once `up` has recorded a launch (the store may still be being created)."""
    if not world.state.exists():
        return False
    try:
        store = world.store()
    except StateError:
        return False
    try:
        return bool(store.launches(fleet))
    finally:
        store.close()


def test_ctrl_c_during_up_says_it_was_interrupted_and_a_rerun_completes(world: World):
    spec = world.spec("hasty")
    # `up` stops after its first round of launches, before it settles and records the plan as applied,
    # and says so: Ctrl-C lands there, whatever the load (no guessed delay)
    proc = world.spawn(
        "up", str(spec), "--yes", "--parallel", "1", env=world.env(SPOTFLEET_TEST_PAUSE_AT="round-launched")
    )
    try:
        assert proc.stderr is not None
        seen = ""
        while "paused at round-launched" not in seen:
            line = proc.stderr.readline()
            assert line, f"`fleet up` ended before the pause point (exit {proc.wait(timeout=60)}): {seen}"
            seen += line
        assert _launching(world, "hasty") and world.created("hasty")  # launched, not yet settled
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "rerunning `fleet up" in err and "is safe" in err
    assert "Traceback" not in err and "Aborted!" not in err
    report = world.fleet_json("up", str(spec), "--yes")
    assert report["ok"] and world.alive("hasty") == report["desired"]
    assert len(world.created("hasty")) == sum(report["desired"].values())  # nothing launched twice


def test_up_into_a_closed_pipe_stops_before_launching_and_says_so(world: World):
    spec = world.spec("piped")
    proc = world.spawn("up", str(spec), "--yes")
    assert proc.stdout is not None
    proc.stdout.close()  # like `| head` that has already stopped reading
    err = proc.stderr.read() if proc.stderr else ""
    proc.wait(timeout=120)
    assert proc.returncode == 1
    assert "output was closed early" in err and "before launching anything" in err and "Traceback" not in err
    assert world.created("piped") == []


def test_a_preemption_is_dated_and_charged_by_the_provider_clock_not_by_when_status_looks(world: World):
    spec = world.spec("dated")
    assert world.fleet_json("up", str(spec), "--yes")["ok"]
    world.cloud.advance(3600)
    spot = next(
        i for i in world.cloud.all_instances(alive_only=True) if i.fleet == "dated" and i.pool.market.value == "spot"
    )
    world.cloud.preempt(spot.id)
    taken = world.cloud.now()
    world.cloud.advance(86400)  # status looks a simulated day later
    world.fleet_json("status", "dated")  # short, but read: exit 0
    history = world.fleet_json("history", "dated")
    (event,) = [e for e in history["events"] if e["kind"] == "preempted" and e["instance_id"] == spot.id]
    assert abs(event["ts"] - taken) <= 1
    (record,) = [r for r in world.store().instances("dated") if r.id == spot.id]
    assert abs(record.ended_at - taken) <= 1 and abs(record.ended_at - record.launched_at - 3600) <= 1


def test_up_after_down_starts_a_new_run_with_its_own_cost_and_interruptions(world: World):
    spec = world.spec("again")
    assert world.fleet_json("up", str(spec), "--yes")["ok"]
    world.cloud.advance(3600)
    first_ids = {i.id for i in world.created("again")}
    spot = next(
        i for i in world.cloud.all_instances(alive_only=True) if i.fleet == "again" and i.pool.market.value == "spot"
    )
    world.cloud.preempt(spot.id)
    first = world.fleet_json("status", "again")
    assert first["run"] == 1 and first["cost"]["interruptions"] >= 1 and first["cost"]["cost_so_far"] > 0
    world.fleet_json("down", "again", "--yes")

    assert world.fleet_json("up", str(spec), "--yes")["ok"]
    second = world.fleet_json("status", "again")
    assert second["run"] == 2 and second["status"] == "up"
    assert second["cost"]["interruptions"] == 0 and second["cost"]["cost_so_far"] == 0  # frozen clock: no time yet
    history = world.fleet_json("history", "again")
    assert history["run"] == 2 and not {e["instance_id"] for e in history["events"]} & first_ids
    everything = world.fleet_json("history", "again", "--all")
    assert first_ids <= {e["instance_id"] for e in everything["events"]}
    assert everything["cost"]["cost_so_far"] >= first["cost"]["cost_so_far"]
    assert everything["cost"]["interruptions"] >= first["cost"]["interruptions"]
    human = world.fleet("history", "again").stdout
    assert "run 2 of this fleet name; --all shows every run" in human


def test_history_footer_counts_the_launch_calls_of_the_run_it_shows(world: World):
    spec = world.spec("footer")
    assert world.fleet_json("up", str(spec), "--yes")["ok"]
    first_calls = len(world.store().launches("footer"))
    world.fleet_json("down", "footer", "--yes")
    assert world.fleet_json("up", str(spec), "--yes")["ok"]
    every_call = world.store().launches("footer")
    second = [launch for launch in every_call[first_calls:]]
    history = world.fleet_json("history", "footer")
    assert [launch["id"] for launch in history["launches"]] == [launch.id for launch in second]
    everything = world.fleet_json("history", "footer", "--all")
    assert len(everything["launches"]) == len(every_call) > len(second)
    footer = world.fleet("history", "footer").stdout.strip().splitlines()[-1]
    assert footer.startswith(
        f"{len(second)} launch call(s) asked for {sum(launch.count for launch in second)} instance(s); "
        f"{sum(launch.launched for launch in second)} came back; cost so far $"
    )
