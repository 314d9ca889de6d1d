"""``fleet up / status / down / check`` as subprocesses against the fake RunPod REST API v2
(backend: cloud): the fleet meets its spec on on-demand pods, a rerun changes nothing, a kill -9
mid-up converges on rerun, a pod that is not the fleet's is never touched, a lost pod is seen
from its status, and ``down`` leaves nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from api_world import ApiWorld, assert_check_reports_the_key  # noqa: E402
from runpod_server import API_KEY, RunPodServer  # noqa: E402

from fleet.state import LaunchStatus, open_store  # noqa: E402

SPEC = """
name: rf
backend: cloud
capacity:
  gpus: 4
  accelerators: [H100]
  gpus_per_node: {min: 1, max: 1}
providers:
  runpod: {clouds: [SECURE]}
diversification:
  max_pool_share: 0.5
node:
  spotfleet: preinstalled   # no checkpoint bucket here to ship spotfleet's wheel through
"""


@pytest.fixture(scope="module")
def server():
    srv = RunPodServer(port=0).start()
    yield srv
    srv.stop()


@pytest.fixture
def world(tmp_path: Path, server: RunPodServer) -> ApiWorld:
    w = ApiWorld(
        tmp_path,
        server.url,
        spec=SPEC,
        name="spec",
        env_vars={"SPOTFLEET_RUNPOD_URL": server.url, "RUNPOD_API_KEY": API_KEY},
        strip=("RUNPOD_",),
    )
    w.control("reset", {})
    w.foreign = w.control("foreign", {"count": 1, "name": "spotfleet-rf"})["ids"]  # ours by name only: not ours
    return w


def pods(world: ApiWorld, *, live: bool = True) -> list[dict]:
    return [
        p
        for p in world.control("pods")["pods"]
        if p["env"].get("SPOTFLEET_LABEL", "").startswith("spotfleet|rf|") and (not live or not p["terminated"])
    ]


def foreign_alive(world: ApiWorld) -> bool:
    return all(not p["terminated"] for p in world.control("pods")["pods"] if p["id"] in world.foreign)


def test_up_meets_the_spec_rerun_is_idempotent_and_down_ends_everything(world: ApiWorld):
    up = world.fleet("up", str(world.spec), "--yes", "--json")
    assert up.returncode == 0, up.stderr
    report = json.loads(up.stdout)
    assert report["ok"] and sum(report["desired"].values()) == 4
    ours = pods(world)
    assert len(ours) == 4 and all(p["cloud"] == "SECURE" for p in ours)
    assert all(pool.endswith("/on-demand") for pool in report["desired"])  # RunPod sells no spot pods
    again = world.fleet_json("up", str(world.spec), "--yes")
    assert again["ok"] and again["launched"] == [] and again["terminated"] == []
    assert len(pods(world, live=False)) == 4
    status = world.fleet_json("status", "rf")
    assert status["running"] == 4 and status["planned"] == 4
    text = world.fleet("status", "rf")
    down_run = world.fleet("down", "rf", "--yes", "--json")
    down = json.loads(down_run.stdout)
    assert sorted(down["terminated"]) == sorted(p["id"] for p in ours) and down["remaining"] == []
    assert pods(world) == [] and foreign_alive(world)
    for proc in (up, text, down_run):  # the key is in no output and not in the state store
        assert API_KEY not in proc.stdout and API_KEY not in proc.stderr
    for path in world.home.rglob("*"):
        if path.is_file():
            assert API_KEY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("point", ["launch-sent:2"])
def test_killed_mid_up_a_rerun_converges_without_duplicates(world: ApiWorld, point: str):
    crashed = world.fleet("up", str(world.spec), "--yes", SPOTFLEET_TEST_CRASH_AT=point)
    assert crashed.returncode == 137, crashed.stderr
    rerun = world.fleet_json("up", str(world.spec), "--yes")
    assert rerun["ok"], rerun
    assert len(pods(world)) == 4 and len(pods(world, live=False)) == 4
    store = open_store(str(world.home / "state.db"), create=False)
    try:
        assert {r.id for r in store.instances("rf", alive_only=True)} == {p["id"] for p in pods(world)}
        assert store.launches("rf", status=LaunchStatus.REQUESTED) == []
    finally:
        store.close()
    world.fleet_json("down", "rf", "--yes")
    assert pods(world) == [] and foreign_alive(world)


def test_a_lost_pod_is_seen_from_its_status_and_replaced(world: ApiWorld):
    world.fleet_json("up", str(world.spec), "--yes")
    victim = pods(world)[0]["id"]
    world.control("lose", {"ids": [victim], "status": "EXITED"})
    status = world.fleet_json("status", "rf", "--check", ok=(3,))
    assert status["running"] == 3 and any(e["id"] == victim for e in status["ended"])
    again = world.fleet_json("up", str(world.spec), "--yes")
    assert again["ok"] and len([p for p in pods(world) if p["status"] == "RUNNING"]) == 4
    world.fleet_json("down", "rf", "--yes")
    assert pods(world) == [] and foreign_alive(world)


def test_fleet_check_runpod_reports_the_key(world: ApiWorld):
    assert_check_reports_the_key(world, "runpod", "RUNPOD_API_KEY", "wrong-key")


def test_a_plan_on_the_snapshot_never_picks_a_runpod_spot_row(world: ApiWorld):
    spot_only = world.root / "spot.yaml"
    spot_only.write_text(SPEC.replace("name: rf", "name: rs").replace("{clouds: [SECURE]}", "{on_demand: false}"))
    world.control("faults", {"target": "catalog", "kind": "forbidden", "count": 1000})  # refused: not retried
    fallback = world.fleet("plan", str(spot_only))  # the snapshot's spot rows: there, but not for sale
    assert fallback.returncode == 1 and "capacity hint is 0" in fallback.stderr and "/spot" in fallback.stderr
