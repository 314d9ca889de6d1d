"""State faults: a lost store, garbage rows, and what `status` says when no plan is recorded."""

from __future__ import annotations

import sqlite3

from cli.world import SMALL_SPEC as SMALL
from cli.world import World


def _up(world: World, name: str) -> dict:
    report = world.fleet_json("up", str(world.spec(name, SMALL)), "--yes")
    assert report["ok"] and len(report["launched"]) == 2
    return report


def _poke(world: World, sql: str, *args: object) -> None:
    with sqlite3.connect(world.state) as conn:
        assert conn.execute(sql, args).rowcount >= 1


def _one_line(proc, *fragments: str) -> None:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr


def test_up_after_down_and_a_lost_store_launches_fresh_instances(world: World):
    first = _up(world, "again")
    world.fleet_json("down", "again", "--yes")
    for f in world.home.glob("state.db*"):
        f.unlink()
    second = world.fleet_json("up", str(world.spec("again", SMALL)), "--yes")
    assert second["ok"] and len(second["launched"]) == 2
    assert not set(second["launched"]) & set(first["launched"])
    assert len(world.alive("again")) >= 1 and sum(world.alive("again").values()) == 2


def test_a_garbage_plan_row_is_a_clear_error_down_still_works_and_repair_rebuilds_it(world: World):
    report = _up(world, "torn")
    _poke(world, "UPDATE plans SET body = ? WHERE fleet = ?", "{not json", "torn")
    for command in (["status", "torn"], ["history", "torn"], ["up", str(world.spec("torn", SMALL)), "--yes"]):
        _one_line(world.fleet(*command), "plans row torn/", "is damaged", "fleet repair torn")
    repaired = world.fleet_json("repair")
    assert [(d["table"], d["fleet"]) for d in repaired["rows_rebuilt"]] == [("plans", "torn")]
    assert repaired["fleets"][0]["running"] == 2
    status = world.fleet_json("status", "torn")
    assert status["running"] == 2 and status["planned"] is None
    again = world.fleet_json("up", str(world.spec("torn", SMALL)), "--yes")
    assert again["ok"] and again["launched"] == [] and world.alive("torn") == report["desired"]


def test_down_works_from_tags_when_the_record_is_broken(world: World):
    report = _up(world, "broken")
    _poke(world, "UPDATE plans SET body = 'garbage' WHERE fleet = ?", "broken")
    _poke(world, "UPDATE instances SET price_per_hour = 'x' WHERE fleet = ?", "broken")
    down = world.fleet("down", "broken", "--yes", "--json")
    assert down.returncode == 0, down.stderr
    assert "fleet repair broken" in down.stderr and "Traceback" not in down.stderr
    assert world.alive("broken") == {} and len(report["launched"]) == 2


def test_down_works_from_tags_when_the_store_file_is_unreadable(world: World):
    _up(world, "wrecked")
    world.state.write_bytes(b"\x00not a database\n" * 400)
    for f in world.home.glob("state.db-*"):
        f.unlink()
    down = world.fleet("down", "wrecked", "--yes")
    assert down.returncode == 0 and "is corrupt" in down.stderr and "fleet repair wrecked" in down.stderr, down.stderr
    assert world.alive("wrecked") == {}


def test_a_garbage_event_detail_breaks_nothing_after_repair(world: World):
    _up(world, "noisy")
    _poke(world, "UPDATE events SET detail = ? WHERE fleet = ? AND id = (SELECT MIN(id) FROM events)", "[[[", "noisy")
    _one_line(world.fleet("history", "noisy"), "events row", "is damaged", "fleet repair noisy")
    out = world.fleet_json("repair", "noisy")
    assert [d["table"] for d in out["rows_rebuilt"]] == ["events"]
    history = world.fleet_json("history", "noisy")
    assert history["counts"]["launched"] == 1 and world.fleet("history", "noisy").returncode == 0


def test_a_damaged_fleet_row_keeps_its_name_and_a_damaged_lock_is_taken_over(world: World):
    _up(world, "rowdy")
    _poke(world, "UPDATE fleets SET spec_json = 'nope', created_at = 'soon' WHERE name = ?", "rowdy")
    _poke(world, "INSERT INTO locks VALUES ('rowdy', 'someone', 'pid?', 'h', 'up', 'x', 'y')")
    _one_line(world.fleet("list"), "fleets row rowdy", "fleet repair rowdy")
    out = world.fleet_json("repair")
    assert sorted(d["table"] for d in out["rows_rebuilt"]) == ["fleets", "locks"]
    listed = world.fleet_json("list")
    assert [f["name"] for f in listed] == ["rowdy"]
    assert world.fleet_json("status", "rowdy")["running"] == 2


def test_status_without_a_plan_says_what_is_known(world: World):
    _up(world, "known")
    for f in world.home.glob("state.db*"):
        f.unlink()
    world.fleet_json("repair", "known")
    text = world.fleet("status", "known")
    assert text.returncode == 0, text.stderr
    assert "of 0 planned" not in text.stdout
    assert "2 instance(s) running (16 GPUs) no applied plan recorded" in " ".join(text.stdout.split())
    assert world.fleet_json("status", "known")["planned"] is None


def test_status_after_an_up_killed_mid_launch_says_so(world: World):
    spec = str(world.spec("cut", SMALL))
    crashed = world.fleet("up", spec, "--yes", env=world.env(SPOTFLEET_TEST_CRASH_AT="launch-sent"))
    assert crashed.returncode == 137
    text = world.fleet("status", "cut")
    assert text.returncode == 0, text.stderr  # read: exit 0, whatever the fleet's state
    assert world.fleet("status", "cut", "--check").returncode == 3  # short of the plan up was applying
    flat = " ".join(text.stdout.split())
    assert "of 0 planned" not in flat and "cut: short, 1 of 2 planned instances running" in flat
    assert world.fleet_json("up", spec, "--yes")["ok"]
    assert world.fleet_json("status", "cut")["planned"] == 2
