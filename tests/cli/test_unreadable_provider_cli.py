"""A provider whose instance listing answers HTTP 200 with a broken body (truncated, an HTML
gateway page, ``{}``, wrong types): every command says the provider could not be read and acts
on nothing it cannot see. Real ``fleet`` subprocesses against the fake Vast and Compute Engine
servers with their "malformed 200" fault on (``tests/fakes/malformed.py``).

Before: `fleet down` exited 0 with "nothing to terminate" and recorded the fleet as down while
its instances ran on; `fleet rebalance` read "0 running" and launched beside them; `fleet status`
said "0 of 4"; on GCP, rebalance and down died with a protobuf ParseError traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cli.vast_world import VastWorld  # noqa: E402
from fakes.gce_server import GceServer, control  # noqa: E402
from vast_server import VastServer  # noqa: E402

from fleet.state import FleetStatus, open_store  # noqa: E402

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))


@pytest.fixture
def world(tmp_path: Path, vast_server: VastServer) -> VastWorld:
    world = VastWorld(tmp_path, vast_server)
    report = world.fleet_json("up", str(world.spec), "--yes")
    assert report["ok"] and len(world.ours()) == 4
    return world


def _break_listing(world: VastWorld, variant: str) -> None:
    world.control("faults", {"target": "list", "kind": "malformed", "variant": variant, "count": 1000})


def _status_of(world: VastWorld, name: str) -> str:
    store = open_store(str(world.home / "state.db"), create=False)
    try:
        return store.get_fleet(name).status
    finally:
        store.close()


@pytest.mark.parametrize("variant", ["html", "wrong-types"])  # every variant on every adapter: tests/contract
def test_down_on_an_unreadable_listing_fails_naming_vast_and_keeps_the_fleet_recorded(world: VastWorld, variant):
    running = sorted(i["id"] for i in world.ours())
    _break_listing(world, variant)
    down = world.fleet("down", "vf", "--yes")
    assert down.returncode == 1, down.stdout + down.stderr
    assert "nothing to terminate" not in down.stdout
    assert "could not read vast" in down.stdout and "vast" in down.stderr and "could not be read" in down.stderr
    assert sorted(i["id"] for i in world.ours()) == running  # still running, still billing
    assert _status_of(world, "vf") != FleetStatus.DOWN
    world.control("faults/clear", {})
    again = world.fleet_json("down", "vf", "--yes")  # readable again: down works
    assert sorted(again["terminated"]) == sorted(str(i) for i in running) and world.ours() == []
    assert _status_of(world, "vf") == FleetStatus.DOWN


def test_rebalance_on_an_unreadable_listing_launches_nothing_and_says_why(world: VastWorld):
    created = len(world.ours(live=False))
    _break_listing(world, "html")
    proc = world.fleet("rebalance", "vf")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = [line for line in proc.stderr.splitlines() if "could not be read" in line]
    assert len(said) == 1 and "vast" in said[0] and "launched and terminated nothing" in said[0]
    assert "weighted GPUs running" not in proc.stdout
    assert len(world.ours(live=False)) == created  # nothing launched beside them
    report = json.loads(world.fleet("rebalance", "vf", "--json").stdout)
    assert report["decision"]["actions"] == [] and "vast" in report["provider_errors"]


def test_status_on_an_unreadable_listing_says_vast_could_not_be_read(world: VastWorld):
    _break_listing(world, "empty")
    proc = world.fleet("status", "vf")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert "unknown" in first and "vast could not be read" in first
    assert "0 of 4 planned instances running (" not in first
    assert "could not read vast" in proc.stderr
    data = json.loads(world.fleet("status", "vf", "--json").stdout)
    assert data["status"] == "unknown" and "vast" in data["provider_errors"]
    assert all(p["running"] is None for p in data["pools"])


# ---- GCP: a truncated aggregated instance list --------------------------------------------

GCP_SPEC = """
name: gcpbroken
backend: cloud
capacity:
  gpus: 2
  accelerators: {T4: 1.0}
  gpus_per_node: {min: 1, max: 1}
providers:
  gcp: {project: spec-project, regions: [us-central1], on_demand: false}
node:
  spotfleet: preinstalled   # no checkpoint bucket here to ship spotfleet's wheel through
"""


def _gcp_fleet(root: Path, gce: GceServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_", "SPOTFLEET_"))}
    env.update(SPOTFLEET_HOME=str(root / "home"), SPOTFLEET_GCE_ENDPOINT=gce.url, COLUMNS="200", NO_COLOR="1")
    return subprocess.run(
        [FLEET_BIN, *args], env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
    )


def test_gcp_truncated_listing_is_a_one_line_provider_error_in_up_rebalance_and_down(tmp_path: Path, gce):
    control(gce.url, "reset", {})
    spec = tmp_path / "gcp.yaml"
    spec.write_text(GCP_SPEC)
    up = _gcp_fleet(tmp_path, gce, "up", str(spec), "--yes")
    assert up.returncode == 0, up.stdout + up.stderr

    def live() -> int:
        return sum(
            1
            for vm in control(gce.url, "instances")["instances"]
            if vm.get("labels", {}).get("spotfleet-fleet") == "gcpbroken" and vm["status"] != "TERMINATED"
        )

    assert live() == 2
    control(gce.url, "malformed", {"variant": "truncated", "count": 1000})
    for args in (("rebalance", "gcpbroken"), ("down", "gcpbroken", "--yes")):
        proc = _gcp_fleet(tmp_path, gce, *args)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr and "ParseError" not in proc.stderr
        assert "gcp" in proc.stderr and "could not be read" in proc.stderr
        assert live() == 2
    # `fleet up` with the listing broken: the reason is said, and nothing is launched (what runs
    # there unseen would be launched twice)
    rerun = _gcp_fleet(tmp_path, gce, "up", str(spec), "--yes")
    assert rerun.returncode == 1 and "Traceback" not in rerun.stderr
    said = " ".join(rerun.stderr.split())
    assert "gcp: could not list instances" in said and "fleet up launched nothing" in said
    assert live() == 2


# ---- two providers, one unreadable: `down` ends what it can read --------------------------

BOTH_SPEC = """
name: both
backend: cloud
capacity:
  gpus: 4
  accelerators: [H100]
  gpus_per_node: {min: 1, max: 1}
providers:
  vast: {min_reliability: 0.9, on_demand: false}
  gcp: {project: spec-project, regions: [us-central1], on_demand: false}
diversification:
  max_pool_share: 0.25
  max_provider_share: 0.5
node:
  spotfleet: preinstalled   # no checkpoint bucket here to ship spotfleet's wheel through
"""


def test_down_terminates_on_the_readable_provider_and_fails_naming_the_other(tmp_path: Path, vast_server, gce):
    control(gce.url, "reset", {})
    world = VastWorld(tmp_path, vast_server)
    spec = tmp_path / "both.yaml"
    spec.write_text(BOTH_SPEC)
    up = world.fleet("up", str(spec), "--yes", "--json", SPOTFLEET_GCE_ENDPOINT=gce.url)
    assert up.returncode == 0, up.stdout + up.stderr

    def on_gcp() -> int:
        return sum(
            1
            for vm in control(gce.url, "instances")["instances"]
            if vm.get("labels", {}).get("spotfleet-fleet") == "both" and vm["status"] != "TERMINATED"
        )

    vast = [i["id"] for i in world.instances() if str(i["label"] or "").startswith("spotfleet|both|")]
    assert on_gcp() == 2 and len(vast) == 2
    _break_listing(world, "truncated")
    down = world.fleet("down", "both", "--yes", SPOTFLEET_GCE_ENDPOINT=gce.url)
    assert down.returncode == 1, down.stdout + down.stderr
    assert "terminated 2 instance(s)" in down.stdout and "vast" in down.stderr
    assert on_gcp() == 0  # the readable provider proceeded
    assert all(not i["destroyed"] for i in world.instances() if i["id"] in vast)
    assert _status_of(world, "both") != FleetStatus.DOWN
    world.control("faults/clear", {})
    again = world.fleet("down", "both", "--yes", SPOTFLEET_GCE_ENDPOINT=gce.url)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _status_of(world, "both") == FleetStatus.DOWN
