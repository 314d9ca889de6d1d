"""`fleet logs` on the local cloud, end to end: a real node runs its job under `fleet run`, the
agent uploads the node log to the fleet's bucket, and `fleet logs` lists it, prints it (escaped),
tails it, follows it until the node ends, and stops on Ctrl-C with 130."""

from __future__ import annotations

import contextlib
import json
import shlex
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent.agent_support import wait_until
from cli.world import FLEET_BIN, World

from providers.local import LocalCloud

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

SPEC = """
name: {name}
backend: local
capacity: {{gpus: 8, accelerators: [H100], gpus_per_node: {{min: 8, max: 8}}}}
node: {{startup: {startup}}}
"""


def _world(tmp_path: Path) -> World:
    LocalCloud.open(tmp_path / "home" / "localcloud", time_scale=0, run_nodes=True)
    return World(tmp_path)


def _up(world: World, name: str, job: str) -> str:
    startup = f"exec {shlex.quote(FLEET_BIN)} run --log-every 0.2 -- sh -c {shlex.quote(job)}"
    spec = world.spec(name, SPEC.replace("{startup}", json.dumps(startup)))
    proc = world.fleet("up", str(spec), "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    (instance,) = world.created(name)
    return instance.id


def _listed(world: World, name: str, *, final: bool) -> dict | None:
    proc = world.fleet("logs", name, "--json")
    if proc.returncode != 0:
        return None
    logs = json.loads(proc.stdout)["logs"]
    return next((m for m in logs if m["final"] or not final), None)


def test_a_nodes_log_reaches_the_bucket_and_fleet_logs_prints_it_escaped_and_tailed(tmp_path):
    world = _world(tmp_path)
    job = r"printf 'hello from the node\n\033[31mred\033[0m\n'; for i in 1 2 3 4 5; do echo line $i; done"
    instance = _up(world, "logs", job)
    try:
        meta = wait_until(lambda: _listed(world, "logs", final=True), 90, "the final upload")
        assert meta["instance"] == instance and meta["size"] > 0 and meta["offset"] == 0

        table = world.fleet("logs", "logs")
        assert table.returncode == 0 and instance in table.stdout and "ended" in table.stdout

        shown = world.fleet("logs", "logs", instance)
        assert shown.returncode == 0, shown.stderr
        out = shown.stdout
        for text in ("hello from the node", "line 1", "line 5", "job finished after 1 start(s)"):
            assert text in out, text
        assert "\x1b" not in out and "\\x1b[31mred" in out  # the node's escapes never reach the terminal

        tail = world.fleet("logs", "logs", instance, "--tail", "2")
        assert tail.stdout.splitlines()[-1] == "job finished after 1 start(s)" and len(tail.stdout.splitlines()) == 2

        as_json = json.loads(world.fleet("logs", "logs", instance, "--json").stdout)
        assert "\x1b[31mred" in as_json["text"] and as_json["final"] is True

        console = world.fleet("logs", "logs", instance, "--console")
        assert console.returncode == 0 and "hello from the node" in console.stdout and "\x1b" not in console.stdout

        missing = world.fleet("logs", "logs", "i-nope")
        assert missing.returncode == 1 and "no log from instance 'i-nope'" in missing.stderr
    finally:
        world.fleet("down", "logs", "--yes")


@contextlib.contextmanager
def _running(world: World, name: str, job: str) -> Iterator[str]:
    """A fleet of one node running ``job``, once its first log upload is there; down afterwards."""
    instance = _up(world, name, job)
    try:
        wait_until(lambda: _listed(world, name, final=False), 90, "the first upload")
        yield instance
    finally:
        world.fleet("down", name, "--yes")


def test_follow_prints_each_line_once_until_the_node_ends(tmp_path):
    world = _world(tmp_path)
    with _running(world, "follow", "for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.3; done") as instance:
        proc = world.fleet("logs", "follow", instance, "--follow", "--interval", "0.2", timeout=120)
    assert proc.returncode == 0, proc.stderr
    ticks = [line for line in proc.stdout.splitlines() if line.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(1, 9)]
    assert proc.stdout.rstrip().endswith("job finished after 1 start(s)")


def test_ctrl_c_stops_following_with_130(tmp_path):
    world = _world(tmp_path)
    with _running(world, "sigint", "echo started; sleep 120") as instance:
        proc = world.spawn("logs", "sigint", instance, "--follow", "--interval", "0.2")
        first = proc.stdout.readline()
        assert first.strip() and proc.poll() is None
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 130 and "stopped following" in err


def test_a_cloud_fleet_without_a_bucket_says_how_to_get_logs(world: World):
    from fleet.state import FleetStatus, open_store

    store = open_store(str(world.state), create=True)
    store.save_fleet("nobucket", status=FleetStatus.UP, spec_json=None, spec_hash="x", backend="cloud")
    store.close()
    proc = world.fleet("logs", "nobucket")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "has no bucket on record" in proc.stderr and "checkpoint.provider" in proc.stderr
    assert "--console" in proc.stderr
