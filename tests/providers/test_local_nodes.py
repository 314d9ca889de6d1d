"""Node processes of a local cloud created with ``run_nodes=True``: real processes that get
their environment, a SIGTERM on preemption after the notice, and a kill on terminate."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fleet.model import LaunchRequest, NodeConfig, fleet_tags
from providers.base import OfferQuery
from providers.local import LocalCloud
from providers.local.nodes import node_dir, running

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

POOL = "aws/us-east-1/use1-az4/p5.48xlarge/on-demand"
STARTUP = """
echo "$SPOTFLEET_INSTANCE_ID|$SPOTFLEET_FLEET|$SPOTFLEET_NOTICE_FILE|$SPOTFLEET_CHECKPOINT_URI|$EXTRA" > env.txt
trap 'echo term > got-term; exit 0' TERM
while true; do sleep 0.05; done
"""


def _wait_for(check, what: str, deadline: float = 30.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def test_nodes_run_get_notices_sigterm_and_kill(tmp_path):
    cloud = LocalCloud.open(tmp_path / "cloud", time_scale=0, run_nodes=True)
    aws = cloud.provider("aws")
    offer = next(o for o in aws.list_offers(OfferQuery()) if o.pool.id == POOL)
    node = NodeConfig(startup=STARTUP, env={"EXTRA": "yes"})
    ids = [
        i.id
        for i in aws.launch(
            LaunchRequest(fleet="demo", offer=offer, count=2, token="t", node=node, tags=fleet_tags("demo", offer.pool))
        ).instances
    ]
    try:
        dirs = [node_dir(cloud.root, i) for i in ids]
        envs = [
            _wait_for(lambda d=d: (d / "env.txt").exists() and (d / "env.txt").read_text().strip(), "env") for d in dirs
        ]
        iid, fleet, notice, uri, extra = envs[0].split("|")
        assert (iid, fleet, extra) == (ids[0], "demo", "yes")
        assert notice == str(cloud.notices / f"{ids[0]}.json") and uri.startswith("file://")

        cloud.preempt(ids[0], notice=True)
        assert json.loads(Path(notice).read_text())["action"] == "terminate"
        assert not (dirs[0] / "got-term").exists(), "the notice comes before the SIGTERM"
        cloud.advance(121)
        _wait_for(lambda: (dirs[0] / "got-term").exists(), "SIGTERM after the notice window")
        outcome = _wait_for(
            lambda: (dirs[0] / "exit.json").exists() and json.loads((dirs[0] / "exit.json").read_text()), "exit record"
        )
        assert outcome == {"reason": "preempted", "returncode": 0}

        pid = cloud.db.read("SELECT pid FROM instances WHERE id=?", (ids[1],))[0]["pid"]
        assert running(pid, ids[1])
        aws.terminate([ids[1]])
        _wait_for(lambda: not running(pid, ids[1]), "the terminated node to die")
        assert not (dirs[1] / "got-term").exists(), "terminate kills without a grace period"
    finally:
        cloud._stop_all_nodes()


def test_nodes_stay_off_unless_asked(tmp_path):
    cloud = LocalCloud.open(tmp_path / "cloud", time_scale=0)
    aws = cloud.provider("aws")
    offer = next(o for o in aws.list_offers(OfferQuery()) if o.pool.id == POOL)
    inst = aws.launch(
        LaunchRequest(
            fleet="demo",
            offer=offer,
            count=1,
            token="t",
            node=NodeConfig(startup="touch ran"),
            tags=fleet_tags("demo", offer.pool),
        )
    )
    assert not node_dir(cloud.root, inst.instances[0].id).exists()
    assert cloud.db.read("SELECT pid FROM instances")[0]["pid"] is None
    assert os.listdir(cloud.root) and not (cloud.root / "nodes").exists()
