"""Injected provider faults during a real `fleet up`: capacity fails over, throttling and 5xx
end short with one line each, and the next run fills the gap with the same tokens."""

from __future__ import annotations

from cli.world import World

from fleet.state import LaunchStatus


def _planned_spot_pools(world: World, spec: str) -> list[str]:
    dry = world.fleet_json("up", spec, "--dry-run")
    return sorted(p for p in dry["changes"] if p.endswith("/spot"))


def test_capacity_failure_fails_over_to_other_pools(world: World):
    spec = str(world.spec())
    dead = _planned_spot_pools(world, spec)[0]
    world.cloud.inject_fault(dead, "capacity", 5)
    proc = world.fleet("up", spec, "--yes")
    assert proc.returncode == 0, proc.stderr
    assert f"blocked {dead} for a while (capacity)" in proc.stdout
    store = world.store()
    try:
        plan = store.latest_plan("chaos", applied_only=True)
        assert dead not in plan.counts()
        assert world.alive("chaos") == plan.counts()
        assert [b.prefix for b in store.blocks()] == [dead]
    finally:
        store.close()


def test_throttling_and_server_errors_end_short_then_a_rerun_fills_in(world: World):
    spec = str(world.spec())
    throttled, broken = _planned_spot_pools(world, spec)[:2]
    world.cloud.inject_fault(throttled, "throttle", 20)  # outlasts the adapter's own retries
    world.cloud.inject_fault(broken, "server-error", 1)
    short = world.fleet("up", spec, "--yes")
    assert short.returncode == 3, short.stderr
    assert "is short by 2 instance(s)" in short.stderr
    assert "Traceback" not in short.stderr
    notes = [line for line in short.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 2 and any(throttled in n for n in notes) and any(broken in n for n in notes)
    store = world.store()
    pending = {launch.pool: launch.token for launch in store.launches("chaos", status=LaunchStatus.REQUESTED)}
    store.close()
    assert set(pending) == {throttled, broken}

    world.cloud.clear_faults()
    report = world.fleet_json("up", spec, "--yes")
    assert report["ok"] and len(report["launched"]) == 2
    assert world.alive("chaos") == report["desired"]
    tokens = {i.id: i for i in world.created("chaos")}
    assert len(tokens) == sum(report["desired"].values())
    store = world.store()
    try:
        replayed = {launch.pool: launch.token for launch in store.launches("chaos") if launch.pool in pending}
        assert replayed == pending  # the same tokens were replayed, no new launch was needed
    finally:
        store.close()
