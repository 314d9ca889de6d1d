"""`fleet up` with a head on the embedded local cloud running real node processes: the head
starts first, the workers get its address and reach it; a head that never runs stops `up`."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from agent.agent_support import wait_until
from click.testing import CliRunner

from fleet.cli.main import cli
from providers.local import LocalCloud
from providers.local.nodes import node_dir

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SPEC = """\
name: roles
backend: local
capacity:
  gpus: 8
  accelerators: [H100]
node:
  startup: >-
    env | grep ^SPOTFLEET_ | sort > env.txt;
    python3 -c "import os,urllib.request; a=os.environ; print('head says', urllib.request.urlopen(
    'http://%s:%s/' % (a['SPOTFLEET_HEAD_ADDR'], a['SPOTFLEET_HEAD_PORT']), timeout=10).read().decode())"
    > reached.txt; sleep 600
head:
  vcpus: 2
  port: {port}
  ready_timeout_seconds: {timeout}
  startup: >-
    env | grep ^SPOTFLEET_ | sort > env.txt;
    python3 -c "import http.server as h; B=h.BaseHTTPRequestHandler;
    S=type('S',(B,),{{'do_GET': lambda s: (s.send_response(200), s.end_headers(), s.wfile.write(b'hello'))}});
    h.HTTPServer(('127.0.0.1', {port}), S).serve_forever()"
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPOTFLEET_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SPOTFLEET_LOCAL_CLOUD", raising=False)
    return tmp_path / "home"


def env_of(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_head_first_then_workers_that_reach_it(home, tmp_path):
    cloud = LocalCloud.open(home / "localcloud", time_scale=600, run_nodes=True)
    port = free_port()
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC.format(port=port, timeout=60))
    runner = CliRunner()
    try:
        result = runner.invoke(cli, ["up", str(spec), "-y", "--json"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        report = json.loads(result.output[result.output.index("{") :])
        (head_pool,) = report["head"]
        assert head_pool.endswith("/on-demand") and report["ok"]
        instances = cloud.all_instances(alive_only=True)
        heads = [i for i in instances if i.tags.get("spotfleet:role") == "head"]
        workers = [i for i in instances if i not in heads]
        assert len(heads) == 1 and len(workers) >= 1
        assert all(w.launched_at > heads[0].launched_at for w in workers)  # the head came first
        for w in workers:
            reached = node_dir(cloud.root, w.id) / "reached.txt"
            assert (
                wait_until(lambda: reached.exists() and reached.read_text().strip(), 60, "a worker to reach the head")
                == "head says hello"
            )
            env = env_of(node_dir(cloud.root, w.id) / "env.txt")
            assert env["SPOTFLEET_ROLE"] == "worker" and env["SPOTFLEET_HEAD_ADDR"] == "127.0.0.1"
            assert env["SPOTFLEET_HEAD_PORT"] == str(port) and env["SPOTFLEET_FLEET"] == "roles"
        head_env = env_of(
            wait_until(
                lambda: (p := node_dir(cloud.root, heads[0].id) / "env.txt").exists() and p, 60, "the head's env"
            )
        )
        assert head_env["SPOTFLEET_ROLE"] == "head" and "SPOTFLEET_HEAD_ADDR" not in head_env
        # a rerun changes nothing: the head and the workers are kept
        again = runner.invoke(cli, ["up", str(spec), "-y", "--json"], catch_exceptions=False)
        assert again.exit_code == 0, again.output
        assert {i.id for i in cloud.all_instances(alive_only=True)} == {i.id for i in instances}
    finally:
        runner.invoke(cli, ["down", "roles", "-y"])


def test_a_head_that_never_runs_stops_up_before_any_worker(home, tmp_path):
    cloud = LocalCloud.open(home / "localcloud", time_scale=0, run_nodes=False)  # the clock stands: always pending
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC.format(port=free_port(), timeout=1))
    result = CliRunner().invoke(cli, ["up", str(spec), "-y"])
    assert result.exit_code == 1
    assert "is not running after 1s" in result.output and "no workers were launched" in result.output
    assert "Traceback" not in result.output
    alive = cloud.all_instances(alive_only=True)
    assert [i.tags.get("spotfleet:role") for i in alive] == ["head"]


def test_a_lost_head_is_relaunched_on_demand_by_rebalance(home, tmp_path):
    cloud = LocalCloud.open(home / "localcloud", time_scale=600, run_nodes=False)
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC.format(port=free_port(), timeout=60))
    runner = CliRunner()
    try:
        assert runner.invoke(cli, ["up", str(spec), "-y", "--json"], catch_exceptions=False).exit_code == 0
        (head,) = [i for i in cloud.all_instances(alive_only=True) if i.tags.get("spotfleet:role") == "head"]
        cloud.provider(head.pool.provider).terminate([head.id])  # the head's host is gone
        result = runner.invoke(cli, ["rebalance", "roles", "--json"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        report = json.loads(result.output[result.output.index("{") :])
        (incident,) = report["decision"]["incidents"]
        assert incident.startswith("INCIDENT: 1 of 1 head node(s) of fleet 'roles' lost")
        (launch,) = [r for r in report["results"] if r["kind"] == "launch"]
        assert (launch["reason"], launch["market"], launch["done"]) == ("head-lost", "on-demand", True)
        (new_head,) = [i for i in cloud.all_instances(alive_only=True) if i.tags.get("spotfleet:role") == "head"]
        assert new_head.id != head.id and new_head.pool == head.pool
        history = runner.invoke(cli, ["history", "roles", "--json"], catch_exceptions=False).output
        assert "head-lost" in history
    finally:
        runner.invoke(cli, ["down", "roles", "-y"])
