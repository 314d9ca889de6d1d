"""``fleet up / status / check / down`` as subprocesses against the fake Lambda server (backend: cloud).

The fake (tests/fakes/lambda_server.py) runs on a thread of the test process; the ``fleet``
command reaches it through ``SPOTFLEET_LAMBDA_URL`` with the fake's key in ``LAMBDA_API_KEY``.
Lambda's capacity is read live: a pool without capacity now is not planned.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from cli.api_world import ApiWorld, assert_check_reports_the_key, assert_key_nowhere  # noqa: E402
from lambda_server import API_KEY, LambdaServer  # noqa: E402

from fleet.state import LaunchStatus, open_store  # noqa: E402
from providers.lambda_cloud.api import LambdaApi  # noqa: E402

SPEC = """
name: lf
backend: cloud
capacity:
  gpus: 6
  accelerators: [A10, H100]
  gpus_per_node: {min: 1, max: 1}
providers:
  lambda: {}
node:
  spotfleet: preinstalled   # no checkpoint bucket here to ship spotfleet's wheel through
"""

#: A10s in three regions (capacity 2, 2, 8), an H100 nowhere with capacity.
CAPACITY = {
    "gpu_1x_a10/us-east-1": 2,
    "gpu_1x_a10/us-west-1": 2,
    "gpu_1x_a10/europe-central-1": 8,
    "gpu_1x_h100_pcie/us-west-3": 0,
}


class LambdaWorld(ApiWorld):
    def __init__(self, root: Path, server: LambdaServer):
        super().__init__(
            root,
            server.url,
            spec=SPEC,
            name="lf",
            strip=("LAMBDA_",),
            env_vars={"SPOTFLEET_LAMBDA_URL": server.url, "LAMBDA_API_KEY": API_KEY},
        )
        self.control("reset", {"capacity": CAPACITY})
        self.control("config", {"boot_seconds": 0, "terminate_seconds": 0, "launch_interval": 0, "quota": 50})
        self.foreign = self.control("foreign", {"name": "spotfleet-lf-0000000000", "count": 1})["ids"]

    def instances(self) -> list[dict]:
        return self.control("instances")["instances"]

    def ours(self, *, live: bool = True) -> list[dict]:
        return [
            i
            for i in self.instances()
            if {"key": "spotfleet:fleet", "value": "lf"} in i["tags"]
            and (not live or i["status"] not in ("terminated", "terminating"))
        ]

    def foreign_alive(self) -> bool:
        return all(i["status"] == "active" for i in self.instances() if i["id"] in self.foreign)


@pytest.fixture(scope="module")
def server():
    srv = LambdaServer(port=0).start()
    yield srv
    srv.stop()


@pytest.fixture
def world(tmp_path: Path, server: LambdaServer) -> LambdaWorld:
    return LambdaWorld(tmp_path, server)


def test_up_meets_the_spec_rerun_is_idempotent_and_down_ends_everything(world: LambdaWorld):
    report = world.fleet_json("up", str(world.spec), "--yes")
    assert report["ok"] and sum(report["desired"].values()) == 6
    assert all("/gpu_1x_a10/" in pool for pool in report["desired"])  # no H100 capacity now
    ours = world.ours()
    assert len(ours) == 6 and all(i["launch_body"]["user_data"].startswith("#!/bin/bash") for i in ours)
    again = world.fleet_json("up", str(world.spec), "--yes")
    assert again["ok"] and again["launched"] == [] and again["terminated"] == []
    assert len(world.ours(live=False)) == 6  # nothing created twice
    status = world.fleet_json("status", "lf")
    assert status["running"] == 6 and status["planned"] == 6
    down = world.fleet_json("down", "lf", "--yes")
    assert sorted(down["terminated"]) == sorted(i["id"] for i in ours) and down["remaining"] == []
    assert world.ours() == [] and world.foreign_alive()
    assert LambdaApi(world.url, API_KEY).ssh_keys() == []  # the fleet's key went too


@pytest.mark.parametrize("point", ["launch-recorded", "launch-sent:2"])
def test_killed_mid_up_a_rerun_converges_without_duplicates(world: LambdaWorld, point: str):
    crashed = world.fleet("up", str(world.spec), "--yes", SPOTFLEET_TEST_CRASH_AT=point)
    assert crashed.returncode == 137, crashed.stderr
    rerun = world.fleet_json("up", str(world.spec), "--yes")
    assert rerun["ok"], rerun
    assert len(world.ours()) == 6 and len(world.ours(live=False)) == 6
    store = open_store(str(world.home / "state.db"), create=False)
    try:
        assert {r.id for r in store.instances("lf", alive_only=True)} == {i["id"] for i in world.ours()}
        assert store.launches("lf", status=LaunchStatus.REQUESTED) == []
    finally:
        store.close()
    world.fleet_json("down", "lf", "--yes")
    assert world.ours() == [] and world.foreign_alive()


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
