"""``fleet up / check / plan`` as subprocesses against the fake Lambda server (backend: cloud): what
only Lambda has. Its world is tests/cli/lambda_world.py; the lifecycle every provider shares (up,
rerun, kill -9 mid-up, down) is tests/cli/test_provider_lifecycle.py.

The fake (tests/fakes/lambda_server.py) runs on a thread of the test process; the ``fleet``
command reaches it through ``SPOTFLEET_LAMBDA_URL`` with the fake's key in ``LAMBDA_API_KEY``.
Lambda's capacity is read live: a pool without capacity now is not planned.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from cli.api_world import assert_check_reports_the_key, assert_key_nowhere  # noqa: E402
from cli.lambda_world import LambdaWorld  # noqa: E402
from lambda_server import API_KEY, LambdaServer  # noqa: E402


@pytest.fixture
def world(tmp_path: Path, lambda_server: LambdaServer) -> LambdaWorld:
    return LambdaWorld(tmp_path, lambda_server)


def test_a_capacity_refusal_is_re_planned_around(world: LambdaWorld):
    for region in ("us-east-1", "us-west-1"):  # room everywhere: only the refusal moves the plan
        world.control("capacity", {"type": "gpu_1x_a10", "region": region, "count": 8})
    world.control("faults", {"target": "launch", "kind": "capacity", "count": 1})
    report = world.fleet_json("up", str(world.spec), "--yes")
    assert report["ok"] and len(world.ours()) == 6
    assert any(f["error_kind"] == "capacity" for f in report["failures"])
    world.fleet_json("down", "lf", "--yes")


def test_the_api_key_appears_in_no_output_and_not_in_the_state_store(world: LambdaWorld):
    assert_key_nowhere(world, API_KEY, "lf")


def test_fleet_check_lambda_reports_the_key(world: LambdaWorld):
    assert_check_reports_the_key(world, "lambda", "LAMBDA_API_KEY", "secret_wrong_key_000000")


def test_plan_reads_live_capacity_and_falls_back_to_the_snapshot(world: LambdaWorld):
    live = world.fleet_json("plan", str(world.spec))
    assert live["feasible"] and {a["offer"]["source"] for a in live["allocations"]} == {"live"}
    world.control("faults", {"target": "types", "kind": "inactive", "count": 1000})  # refused, not retried
    fallback = world.fleet("plan", str(world.spec))
    assert fallback.returncode in (0, 3) and "snapshot" in fallback.stdout + fallback.stderr
    world.control("faults/clear", {})
