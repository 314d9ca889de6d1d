"""``fleet local ...`` through click, and once as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from support.local_cloud import fleet

from fleet.cli.local_cmd import parse_duration
from fleet.cli.main import cli
from fleet.errors import FleetError
from fleet.model import LaunchRequest, fleet_tags
from providers.base import OfferQuery
from providers.local import LocalCloud

POOL = "aws/us-east-1/use1-az4/p5.48xlarge/on-demand"
SPOT = "aws/us-east-1/use1-az4/p5.48xlarge/spot"


def _ours(root, count: int = 2, pool: str = POOL) -> list[str]:
    cloud = LocalCloud.open(root)
    offer = next(o for o in cloud.provider("aws").list_offers(OfferQuery()) if o.pool.id == pool)
    req = LaunchRequest(fleet="demo", offer=offer, count=count, token=f"t-{pool}", tags=fleet_tags("demo", offer.pool))
    return [i.id for i in cloud.provider("aws").launch(req).instances]


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("90", 90),
        ("90s", 90),
        ("15m", 900),
        ("2h", 7200),
        ("1d", 86400),
        ("1h30m", 5400),
        ("1h 30m", 5400),
        ("0.5h", 1800),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "1x", "1h 30", "30 1h", "-5s", "1h30"])
def test_bad_durations_name_the_format(text):
    with pytest.raises(FleetError, match="90s, 15m, 2h"):
        parse_duration(text)


def test_status_of_a_cloud_that_does_not_exist_yet(root):
    result = fleet("local", "status", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout) == {"root": str(root), "exists": False}
    assert "no local cloud" in fleet("local", "status").stdout


def test_reset_then_status_shows_settings_and_instances(root):
    args = ("--time-scale", "0", "--seed", "5", "--run-nodes", "--api-latency", "0.001")
    assert fleet("local", "reset", "--yes", *args).exit_code == 0
    ids = _ours(root)
    data = json.loads(fleet("local", "status", "--json").stdout)
    assert (data["time_scale"], data["seed"], data["run_nodes"], data["api_latency"]) == (0, 5, True, 0.001)
    assert data["counts"] == {"pending": 2}
    assert [i["id"] for i in data["instances"]] == ids
    human = fleet("local", "status").stdout
    assert "x0" in human and "seed 5" in human and "2 alive" in human
    assert all(i in human for i in ids)
    short = fleet("local", "status", "--limit", "1").stdout
    assert ids[0] in short and ids[1] not in short and "1 more" in short
    kept = json.loads(fleet("local", "reset", "--yes", "--seed", "6", "--json").stdout)
    assert (kept["time_scale"], kept["seed"], kept["run_nodes"], kept["api_latency"]) == (0, 6, True, 0.001)


def test_advance_preempt_and_foreign(root):
    fleet("local", "reset", "--yes", "--time-scale", "0")
    ids = _ours(root)
    moved = json.loads(fleet("local", "advance", "2h", "--json").stdout)
    assert moved["elapsed_seconds"] == 7200 and moved["ended"] == []
    refused = fleet("local", "preempt", ids[0])  # providers never preempt on-demand capacity
    assert refused.exit_code == 1 and "is an on-demand instance" in refused.stderr
    LocalCloud.open(root).set_capacity(SPOT, 4)
    spot = _ours(root, 1, SPOT)
    gone = json.loads(fleet("local", "preempt", spot[0], "--json").stdout)
    assert gone["state"] == "preempted"
    theirs = json.loads(fleet("local", "foreign", POOL, "--count", "2", "--json").stdout)
    assert len(theirs) == 2 and all(i["fleet"] == "" for i in theirs)
    data = json.loads(fleet("local", "status", "--json", "--all").stdout)
    assert data["counts"] == {"pending": 2, "preempted": 1, "running": 2} and data["foreign"] == 2


def test_inject_and_capacity_are_visible_to_the_provider(root):
    fleet("local", "reset", "--yes", "--time-scale", "0")
    assert fleet("local", "inject", "aws/us-east-1", "capacity", "--count", "2").exit_code == 0
    assert fleet("local", "capacity", POOL, "3").exit_code == 0
    data = json.loads(fleet("local", "status", "--json").stdout)
    assert data["faults"] == [{"prefix": "aws/us-east-1", "kind": "capacity", "remaining": 2}]
    assert data["capacity_overrides"] == {POOL: 3}
    cloud = LocalCloud.open(root)
    assert cloud.free_capacity(POOL) == 3


def test_bad_input_is_one_line_with_the_fix(root):
    fleet("local", "reset", "--yes")
    for args, expected in [
        (("local", "preempt", "i-0nope"), "does not exist"),
        (("local", "foreign", "aws/nowhere"), "see `fleet offers`"),
        (("local", "inject", "nocloud/x", "capacity"), "must start with a provider name"),
        (("local", "advance", "soon"), "cannot read duration"),
    ]:
        result = fleet(*args)
        assert result.exit_code == 1
        assert result.stderr.count("\n") == 1 and expected in result.stderr


def test_reset_asks_before_deleting(root):
    fleet("local", "reset", "--yes")
    _ours(root)
    result = CliRunner().invoke(cli, ["local", "reset"], input="n\n")
    assert result.exit_code == 1
    assert "2 running instance(s) (2 on-demand) of fleet(s) demo" in result.stderr
    assert "not confirmed" in result.stderr and "--yes" in result.stderr
    assert len(LocalCloud.open(root).all_instances()) == 2


def test_reset_keeps_simulated_time_monotonic(root):
    fleet("local", "reset", "--yes", "--time-scale", "0")
    before = json.loads(fleet("local", "advance", "3d", "--json").stdout)["now"]
    fleet("local", "reset", "--yes")
    assert LocalCloud.open(root).now() >= before


def test_a_real_fleet_process_sees_what_this_one_did(root):
    fleet("local", "reset", "--yes", "--time-scale", "0")
    ids = _ours(root, 3)
    env = {**os.environ, "SPOTFLEET_LOCAL_CLOUD": str(root)}
    out = subprocess.run(
        [sys.executable, "-m", "fleet.cli.main", "local", "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert [i["id"] for i in json.loads(out)["instances"]] == ids
