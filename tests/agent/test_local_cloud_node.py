"""The whole loop on the embedded local cloud: a node runs ``fleet run`` as its startup command,
the cloud writes its preemption notice, the agent inside the wrapper gets the final checkpoint
out, and a new node of the same fleet resumes exactly there."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from agent_support import EXAMPLE, last_step, wait_until

from fleet.model import LaunchRequest, Market, NodeConfig, fleet_tags
from providers.base import OfferQuery
from providers.local import LocalCloud
from providers.local.nodes import node_dir

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

PY = shlex.quote(sys.executable)
STARTUP = (
    f"exec {PY} -m fleet.cli.main run --cloud auto --json -- "
    f"{PY} {shlex.quote(str(EXAMPLE))} --steps 100000 --save-every 10 --step-time 0.01 --backend numpy"
)


def run_result(log: Path) -> dict | None:
    text = log.read_text() if log.exists() else ""
    start = text.rfind("\n{\n")
    return json.loads(text[start + 1 :]) if start >= 0 and text.rstrip().endswith("}") else None


def test_preempted_node_checkpoints_and_the_next_node_resumes_there(tmp_path, monkeypatch):
    monkeypatch.setenv("SPOTFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    cloud = LocalCloud.open(tmp_path / "cloud", time_scale=0, run_nodes=True)
    aws = cloud.provider("aws")
    offer = next(o for o in aws.list_offers(OfferQuery()) if o.market is Market.SPOT and (o.capacity_hint or 0) >= 2)

    def launch(token: str) -> str:
        result = aws.launch(
            LaunchRequest(
                fleet="train",
                offer=offer,
                count=1,
                token=token,
                node=NodeConfig(startup=STARTUP),
                tags=fleet_tags("train", offer.pool),
            )
        )
        return result.instances[0].id

    try:
        first = launch("node-1")
        log1 = node_dir(cloud.root, first) / "node.log"
        wait_until(lambda: log1.exists() and last_step(log1) >= 15, what="the first node to train")
        cloud.preempt(first, notice=True)  # writes the notice; the hard-off comes later
        result = wait_until(lambda: run_result(log1), what="the wrapper to finish on the notice")
        notice = result["notices"][0]
        assert (result["status"], notice["cloud"], notice["kind"]) == ("interrupted", "local", "terminate")
        assert notice["checkpoint_committed"] and notice["checkpoint_step"] == last_step(log1)
        final = last_step(log1)
        cloud.advance(121)  # the preemption itself

        second = launch("node-2")
        log2 = node_dir(cloud.root, second) / "node.log"
        wait_until(lambda: log2.exists() and "resumed from step" in log2.read_text(), what="the next node")
        assert f"resumed from step {final} " in log2.read_text()
        wait_until(lambda: last_step(log2) > final, what="training to continue on the new node")
    finally:
        cloud._stop_all_nodes()
