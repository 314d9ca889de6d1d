"""``fleet up / status / down / check / plan`` as subprocesses against the fake RunPod REST API v2
(backend: cloud): what only RunPod has (a lost pod seen from its status, no spot rows). Its world
is tests/cli/runpod_world.py; the lifecycle every provider shares (up, rerun, kill -9 mid-up,
down) is tests/cli/test_provider_lifecycle.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from cli.api_world import assert_check_reports_the_key  # noqa: E402
from cli.runpod_world import SPEC, RunPodWorld  # noqa: E402
from runpod_server import RunPodServer  # noqa: E402


@pytest.fixture
def world(tmp_path: Path, runpod_server: RunPodServer) -> RunPodWorld:
    return RunPodWorld(tmp_path, runpod_server)


def test_a_lost_pod_is_seen_from_its_status_and_replaced(world: RunPodWorld):
    world.fleet_json("up", str(world.spec), "--yes")
    victim = world.ours()[0]["id"]
    world.control("lose", {"ids": [victim], "status": "EXITED"})
    status = world.fleet_json("status", "rf", "--check", ok=(3,))
    assert status["running"] == 3 and any(e["id"] == victim for e in status["ended"])
    again = world.fleet_json("up", str(world.spec), "--yes")
    assert again["ok"] and len([p for p in world.ours() if p["status"] == "RUNNING"]) == 4
    world.fleet_json("down", "rf", "--yes")
    assert world.ours() == [] and world.foreign_alive()


def test_fleet_check_runpod_reports_the_key(world: RunPodWorld):
    assert_check_reports_the_key(world, "runpod", "RUNPOD_API_KEY", "wrong-key")


def test_a_plan_on_the_snapshot_never_picks_a_runpod_spot_row(world: RunPodWorld):
    spot_only = world.root / "spot.yaml"
    spot_only.write_text(SPEC.replace("name: rf", "name: rs").replace("{clouds: [SECURE]}", "{on_demand: false}"))
    world.control("faults", {"target": "catalog", "kind": "forbidden", "count": 1000})  # refused: not retried
    fallback = world.fleet("plan", str(spot_only))  # the snapshot's spot rows: there, but not for sale
    assert fallback.returncode == 1 and "capacity hint is 0" in fallback.stderr and "/spot" in fallback.stderr
