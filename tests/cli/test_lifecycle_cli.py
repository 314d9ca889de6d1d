"""`fleet up/status/history/down/list` as a user runs them: real subprocesses of the installed
command against a local cloud in a temporary home."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from cli.world import FLEET_BIN, World
from cli.world import SMALL_SPEC as STATE_SMALL

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_on_a_fresh_machine(tmp_path: Path):
    """The README's main job, with nothing prepared: default home, default cloud settings."""
    home = tmp_path / "fresh"
    env = World(tmp_path).env()
    env["SPOTFLEET_HOME"] = str(home)

    def fleet(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([FLEET_BIN, *args], env=env, capture_output=True, text=True, timeout=120)

    up = fleet("up", str(ROOT / "examples/quickstart.yaml"), "--yes", "--json")
    report = json.loads(up.stdout)
    # the clock runs (60x): if the market takes a spot instance back mid-launch, the run ends
    # short (exit 3) and a rerun fills it in, as it would for a user
    for _ in range(3):
        if up.returncode != 3:
            break
        assert report["missing"] and report["feasible"]
        up = fleet("up", str(ROOT / "examples/quickstart.yaml"), "--yes", "--json")
        report = json.loads(up.stdout)
    assert up.returncode == 0, up.stderr
    assert report["ok"] and report["missing"] == {} and report["counts"] == report["desired"]
    on_demand = [p for p in report["desired"] if p.endswith("/on-demand")]
    spot = [p for p in report["desired"] if p.endswith("/spot")]
    assert on_demand and len(spot) >= 3
    data = json.loads(fleet("status", "quickstart", "--json").stdout)
    planned = sum(report["desired"].values())
    assert data["planned"] == planned and data["status"] == "up"
    # instances taken back since are counted as interruptions, never silently lost
    assert data["running"] <= planned <= data["running"] + data["cost"]["interruptions"]
    assert data["cost"]["cost_so_far"] > 0 and data["cost"]["rate_per_hour"] > 0
    assert (home / "state.db").exists() and (home / "localcloud").is_dir()


def test_up_twice_down_twice(world: World):
    spec = world.spec("twice")
    first = world.fleet_json("up", str(spec), "--yes")
    assert first["ok"] and len(first["launched"]) == 8
    second = world.fleet_json("up", str(spec), "--yes")
    assert second["ok"] and second["launched"] == [] and second["terminated"] == []
    assert world.alive("twice") == first["desired"]
    listed = world.fleet_json("list")
    assert [(f["name"], f["status"], f["instances"]) for f in listed] == [("twice", "up", 8)]

    down = world.fleet_json("down", "twice", "--yes")
    assert sorted(down["terminated"]) == sorted(first["launched"]) and down["remaining"] == []
    again = world.fleet("down", "twice", "--yes")
    assert again.returncode == 0 and "nothing to terminate" in again.stdout
    assert world.alive("twice") == {}
    status = world.fleet_json("status", "twice")
    assert status["status"] == "down" and status["running"] == 0
    history = world.fleet_json("history", "twice")
    assert history["counts"]["launched"] == 8 and history["counts"]["terminated"] == 8


def test_dry_run_changes_nothing_and_up_needs_confirmation(world: World):
    spec = world.spec("careful")
    dry = world.fleet_json("up", str(spec), "--dry-run")
    assert dry["dry_run"] and sum(dry["changes"].values()) == 8 and dry["current"] == {}
    assert not world.state.exists() and world.created("careful") == []
    human = world.fleet("up", str(spec), "--dry-run")
    assert human.returncode == 0 and "dry run: would launch 8 and terminate 0" in human.stdout
    refused = world.fleet("up", str(spec))
    assert refused.returncode == 1 and "pass --yes" in refused.stderr and "Traceback" not in refused.stderr
    assert world.created("careful") == []


def test_unknown_fleet_and_missing_store_are_clear(world: World):
    for cmd in (["status", "ghost"], ["down", "ghost", "--yes"], ["history", "ghost"]):
        proc = world.fleet(*cmd)
        assert proc.returncode == 1 and "no state store at" in proc.stderr and "fleet repair" in proc.stderr
    assert "no fleets yet" in world.fleet("list").stdout
    world.fleet_json("up", str(world.spec("real")), "--yes")
    for cmd in (["status", "ghost"], ["down", "ghost", "--yes"], ["history", "ghost"]):
        proc = world.fleet(*cmd)
        assert proc.returncode == 1
        assert proc.stderr.startswith("error: no fleet named 'ghost'") and "known fleets: real" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_foreign_instances_are_never_touched(world: World):
    spec = world.spec("mine")
    plan = world.fleet_json("up", str(spec), "--dry-run")["plan"]
    pools = [a["offer"]["pool"] for a in plan["allocations"]]
    pool_ids = [
        "/".join([p["provider"], p["region"], p["zone"] or "-", p["instance_type"], p["market"]]) for p in pools
    ]
    foreign = [i.id for pid in pool_ids for i in world.cloud.launch_foreign(pid, 1)]
    report = world.fleet_json("up", str(spec), "--yes")
    assert report["ok"] and not set(foreign) & set(report["launched"])
    world.fleet_json("down", "mine", "--yes")
    alive = {i.id for i in world.cloud.all_instances(alive_only=True)}
    assert alive == set(foreign)


def test_status_records_preemptions_and_cost_and_up_refills(world: World):
    spec = world.spec("watched")
    assert world.fleet_json("up", str(spec), "--yes")["ok"]
    world.cloud.advance(3600)  # one simulated hour; the market may take spot instances back meanwhile
    spot = next(
        i for i in world.cloud.all_instances(alive_only=True) if i.fleet == "watched" and i.pool.market.value == "spot"
    )
    world.cloud.preempt(spot.id)
    gone = {i.id for i in world.created("watched") if i.state.value == "preempted"}
    status = world.fleet_json("status", "watched", "--check", ok=(3,))  # short of the plan: --check exits 3
    assert status["running"] == 8 - len(gone) and status["planned"] == 8
    assert (status["status"], status["recorded_status"]) == ("short", "up")
    assert {e["id"] for e in status["ended"]} == gone and {e["reason"] for e in status["ended"]} == {"preempted"}
    assert status["cost"]["interruptions"] == len(gone)
    # each instance is charged until it ended on the provider's clock (the cloud knows when), else until now
    now = world.cloud.now()
    owed = sum(
        i.price_per_hour * ((i.ended_at if i.ended_at is not None else now) - i.launched_at) / 3600
        for i in world.created("watched")
    )
    assert abs(status["cost"]["cost_so_far"] - owed) < 0.001 * owed
    human = world.fleet("status", "watched")
    assert human.returncode == 0  # it could be read: 0, as `kubectl get`
    assert f"watched: short, {8 - len(gone)} of 8 planned instances running" in human.stdout
    assert f"interruptions  {len(gone)}\n" in human.stdout
    lines = world.fleet("status", "watched", "--watch", "--times", "2", "--interval", "0.2", "--json")
    snapshots = [json.loads(line) for line in lines.stdout.splitlines()]
    assert len(snapshots) == 2 and [s["running"] for s in snapshots] == [8 - len(gone)] * 2
    refill = world.fleet_json("up", str(spec), "--yes")
    assert refill["ok"] and len(refill["launched"]) == len(gone)
    assert world.alive("watched") == refill["desired"]
    assert world.fleet_json("status", "watched")["status"] == "up"


HOLDER = textwrap.dedent("""
    import sys, time
    from fleet.state import open_store
    store = open_store(sys.argv[1])
    store.acquire_lock(sys.argv[2], "up")
    print("locked", flush=True)
    time.sleep(120)
""")


def test_a_busy_fleet_is_refused_and_status_reads_only(world: World):
    spec = world.spec("busy")
    world.fleet_json("up", str(spec), "--yes")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(world.state), "busy"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        down = world.fleet("down", "busy", "--yes")
        assert down.returncode == 75 and f"`fleet up` (pid {holder.pid} on " in down.stderr
        again = world.fleet("up", str(spec), "--yes")
        assert again.returncode == 75 and "is busy" in again.stderr
        status = world.fleet_json("status", "busy")
        assert status["running"] == 8 and not status["reconciled"] and f"pid {holder.pid}" in status["busy"]
    finally:
        holder.kill()
        holder.wait()
    assert world.fleet_json("down", "busy", "--yes")["remaining"] == []


HUGE = """
name: {name}
backend: local
capacity:
  gpus: 100000
  accelerators: [H100]
"""


def test_a_plan_above_the_cost_ceiling_launches_nothing_without_the_flag(world: World):
    huge = world.fleet("up", str(world.spec("typo", HUGE)), "--yes")
    assert huge.returncode == 1 and "Traceback" not in huge.stderr, huge.stderr
    flat = " ".join(huge.stderr.split())
    assert re.search(r"costs \$[0-9,]{7,}\.\d\d/h, above \$500\.00/h", flat) and "--max-cost" in flat, flat
    assert world.created("typo") == []
    small = str(world.spec("small", STATE_SMALL))
    capped = world.fleet("up", small, "--yes", "--max-cost", "1")
    assert capped.returncode == 1 and "above $1.00/h (--max-cost)" in " ".join(capped.stderr.split())
    assert world.created("small") == []
    allowed = world.fleet_json("up", small, "--yes", "--max-cost", "1000")
    assert allowed["ok"] and len(allowed["launched"]) == 2
