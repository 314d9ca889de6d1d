"""A missing or corrupt state store: clear errors, then `fleet repair` rebuilds the record from tags."""

from __future__ import annotations

from cli.world import World


def _up(world: World, name: str = "keep") -> dict:
    report = world.fleet_json("up", str(world.spec(name)), "--yes")
    assert report["ok"]
    return report


def test_corrupt_store_is_a_clear_error_and_repair_rebuilds_it(world: World):
    report = _up(world)
    world.state.write_bytes(b"\x00garbage, not a database\n" * 400)
    for f in world.home.glob("state.db-*"):
        f.unlink()
    status = world.fleet("status", "keep")
    assert status.returncode == 1 and "is corrupt" in status.stderr and "fleet repair" in status.stderr
    assert "Traceback" not in status.stderr

    repaired = world.fleet_json("repair")
    assert repaired["moved_aside"] and repaired["moved_aside"].startswith(str(world.state) + ".broken-")
    (fleet,) = repaired["fleets"]
    assert fleet["fleet"] == "keep" and fleet["running"] == 8 and fleet["discovered"] == 8
    assert fleet["pools"] == report["desired"] and fleet["plans_seen"] == [report["plan_id"]]

    after = world.fleet_json("status", "keep")
    assert after["status"] == "repaired" and after["running"] == 8 and after["cost"]["running"] == 8
    # the spec comes back with --spec; then `up` finds nothing to do
    world.fleet_json("repair", "keep", "--spec", str(world.spec("keep")))
    again = world.fleet_json("up", str(world.spec("keep")), "--yes")
    assert again["ok"] and again["launched"] == [] and again["terminated"] == []
    assert world.alive("keep") == report["desired"]


def test_missing_store_and_repair_by_name(world: World):
    report = _up(world, "lost")
    for f in world.home.glob("state.db*"):
        f.unlink()
    down = world.fleet("down", "lost", "--yes")
    assert down.returncode == 1 and "no state store at" in down.stderr and "fleet repair" in down.stderr
    rebuilt = world.fleet_json("repair", "lost")
    assert rebuilt["moved_aside"] is None and rebuilt["fleets"][0]["running"] == 8
    gone = world.fleet_json("down", "lost", "--yes")
    assert sorted(gone["terminated"]) == sorted(report["launched"])
    assert world.alive("lost") == {}


def test_repair_of_a_healthy_record_only_reconciles(world: World):
    _up(world, "fine")
    victim = next(i for i in world.created("fine") if i.pool.market.value == "spot")
    world.cloud.preempt(victim.id)
    out = world.fleet_json("repair", "fine")
    assert out["moved_aside"] is None
    assert [(f["fleet"], f["status"], f["running"], f["ended"], f["discovered"]) for f in out["fleets"]] == [
        ("fine", "up", 7, 1, 0)
    ]
    nothing = world.fleet("repair", "nobody")
    assert nothing.returncode == 0 and "not in the record and no instance carries its tag" in nothing.stdout
    store = world.store()
    assert store.find_fleet("nobody") is None
    store.close()


def test_repair_refuses_to_move_a_store_of_a_newer_version(world: World):
    import sqlite3

    _up(world, "newer")
    conn = sqlite3.connect(world.state)
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()
    out = world.fleet("repair")
    assert out.returncode == 1 and "newer than this spotfleet knows" in out.stderr
    assert not list(world.home.glob("state.db.broken-*"))


def test_instances_found_by_repair_keep_their_on_demand_reference_so_savings_still_read(world: World):
    _up(world, "saver")
    world.cloud.advance(3600)
    before = world.fleet_json("status", "saver", ok=(0, 3))["cost"]
    assert before["savings_fraction"] > 0 and abs(before["covered_fraction"] - 1) < 1e-9
    for f in world.home.glob("state.db*"):
        f.unlink()
    world.fleet_json("repair", "saver")
    after = world.fleet_json("status", "saver", ok=(0, 3))["cost"]
    assert abs(after["covered_fraction"] - 1) < 1e-9  # every instance has an on-demand price again
    assert (
        after["running"] == before["running"] and after["on_demand_rate_per_hour"] == before["on_demand_rate_per_hour"]
    )
    assert after["savings_fraction"] > 0.5  # (the record of an instance that ended before the repair is gone)
    assert "saved $" in world.fleet("status", "saver").stdout
