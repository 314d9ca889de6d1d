"""``fleet up / status / down`` as subprocesses against the fake Vast server (backend: cloud): what
only Vast has (refused bids, outbid machines). Its world is tests/cli/vast_world.py; the lifecycle
every provider shares (up, rerun, kill -9 mid-up, down) is tests/cli/test_provider_lifecycle.py.

The fake (tests/fakes/vast_server.py) runs on a thread of the test process; the ``fleet``
command reaches it through ``SPOTFLEET_VAST_URL`` with the fake's key in ``VAST_API_KEY``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from cli.api_world import assert_check_reports_the_key, assert_key_nowhere  # noqa: E402
from cli.vast_world import ASKS, VastWorld  # noqa: E402
from vast_server import API_KEY, VastServer  # noqa: E402


@pytest.fixture
def world(tmp_path: Path, vast_server: VastServer) -> VastWorld:
    return VastWorld(tmp_path, vast_server)


def test_a_refused_bid_is_destroyed_at_once_and_the_pool_replaced(world: VastWorld):
    cheapest = ASKS[0]["id"]
    world.control("faults", {"target": f"ask:{cheapest}", "kind": "failed-bid", "count": 1})
    report = world.fleet_json("up", str(world.spec), "--yes")
    assert report["ok"] and len(world.ours()) == 4
    refused = [i for i in world.ours(live=False) if i["ask"] == cheapest and i["destroyed"]]
    assert len(refused) == 1 and refused[0]["cur_state"] == "stopped"  # the stopped leftover is gone
    assert any(f["error_kind"] == "capacity" and "refused" in f["error_message"] for f in report["failures"])


def test_outbid_is_shown_with_its_storage_cost_and_down_destroys_it(world: VastWorld):
    world.fleet_json("up", str(world.spec), "--yes")
    victim = world.ours()[0]["id"]
    world.control("outbid", {"ids": [victim]})
    status = world.fleet_json("status", "vf", "--check", ok=(3,))  # short of its plan: --check exits 3
    assert status["running"] == 3 and status["status"] == "short"
    [held] = status["stopped"]
    assert held["id"] == str(victim) and held["reason"] == "outbid" and held["storage_per_hour"] > 0
    assert any(e["id"] == str(victim) for e in status["ended"])  # counted as an interruption
    text = world.fleet("status", "vf")
    assert text.returncode == 0 and f"{victim} outbid" in text.stdout and "still billing storage" in text.stdout
    down = world.fleet_json("down", "vf", "--yes")
    assert str(victim) in down["terminated"] and world.ours() == [] and world.foreign_alive()


def test_the_api_key_appears_in_no_output_and_not_in_the_state_store(world: VastWorld):
    assert_key_nowhere(world, API_KEY, "vf")


def test_fleet_check_vast_reports_the_key(world: VastWorld):
    assert_check_reports_the_key(world, "vast", "VAST_API_KEY", "wrong-key")


def test_plan_reads_live_offers_and_falls_back_to_the_snapshot(world: VastWorld):
    live = world.fleet_json("plan", str(world.spec))
    pools = [a["offer"]["pool"] for a in live["allocations"]]
    assert live["feasible"] and all(p["instance_type"].endswith(tuple(f"-m{800 + n}" for n in range(8))) for p in pools)
    world.control("faults", {"target": "search", "kind": "server-error", "count": 1000})
    fallback = world.fleet("plan", str(world.spec))
    assert fallback.returncode in (0, 3) and "snapshot" in fallback.stdout + fallback.stderr
    world.control("reset", {"asks": ASKS})
