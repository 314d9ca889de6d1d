"""Secrets in node.env: referenced by name, resolved at launch, passed to the nodes only, never
stored or printed; the state folder and the node files are private."""

from __future__ import annotations

import stat
import time
from pathlib import Path

from cli.world import World

from providers.local import LocalCloud

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY-not-a-real-key"

SPEC = """
name: {name}
backend: local
capacity:
  gpus: 8
  accelerators: [H100]
  gpus_per_node: {{min: 8, max: 8}}
node:
  startup: 'printf %s "$AWS_SECRET_ACCESS_KEY" > got.txt; sleep 60'
  env:
    AWS_SECRET_ACCESS_KEY: ${{env:TEST_NODE_SECRET}}
    WANDB_PROJECT: demo
"""


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _world(tmp_path: Path) -> World:
    LocalCloud.open(tmp_path / "home" / "localcloud", time_scale=0, run_nodes=True)
    return World(tmp_path)


def _kept_bytes(world: World) -> bytes:
    """Everything spotfleet keeps on disk outside the nodes' own folders."""
    kept = [p for p in world.home.rglob("*") if p.is_file() and "nodes" not in p.parts]
    return b"".join(p.read_bytes() for p in kept)


def test_a_referenced_secret_reaches_the_node_and_nothing_else(tmp_path):
    world = _world(tmp_path)
    spec = world.spec("secret", SPEC)
    env = world.env(TEST_NODE_SECRET=SECRET)
    outputs = [world.fleet("spec", "check", str(spec), "--json", env=env)]
    outputs.append(world.fleet("up", str(spec), "--yes", "--json", env=env))
    assert outputs[-1].returncode == 0, outputs[-1].stderr
    (instance,) = world.created("secret")
    node_dir = world.home / "localcloud" / "nodes" / instance.id
    deadline = time.monotonic() + 30
    while not (node_dir / "got.txt").exists() or not (node_dir / "got.txt").read_text():
        assert time.monotonic() < deadline, "the node never wrote its secret"
        time.sleep(0.1)
    assert (node_dir / "got.txt").read_text() == SECRET
    outputs += [world.fleet(*args, "--json", env=env) for args in (["status", "secret"], ["history", "secret"])]
    for proc in outputs:
        assert SECRET not in proc.stdout + proc.stderr
    assert "${env:TEST_NODE_SECRET}" in outputs[0].stdout
    assert SECRET.encode() not in _kept_bytes(world)
    # private: the home and the store 0700/0600, the node's own files 0700/0600
    assert _mode(world.home) == 0o700 and _mode(world.state) == 0o600
    for wal in world.home.glob("state.db-*"):
        assert _mode(wal) == 0o600, wal
    assert _mode(node_dir) == 0o700 and _mode(node_dir / "node.json") == 0o600
    world.fleet_json("down", "secret", "--yes")
    assert SECRET.encode() not in _kept_bytes(world)


def test_an_unset_secret_variable_stops_up_before_anything_launches(tmp_path):
    world = _world(tmp_path)
    proc = world.fleet("up", str(world.spec("unset", SPEC)), "--yes")
    assert proc.returncode == 1 and "$TEST_NODE_SECRET" in proc.stderr and "Traceback" not in proc.stderr
    assert world.created("unset") == []


def test_a_literal_secret_in_a_spec_is_refused(world: World):
    spec = world.spec("literal", SPEC.replace("${{env:TEST_NODE_SECRET}}", SECRET))
    proc = world.fleet("spec", "check", str(spec), "--json")
    assert proc.returncode == 2 and "node.env: AWS_SECRET_ACCESS_KEY looks like a secret" in proc.stderr
    assert "${env:AWS_SECRET_ACCESS_KEY}" in proc.stderr and SECRET not in proc.stderr + proc.stdout


def _written(node_dir: Path) -> str:
    deadline = time.monotonic() + 30
    while not (node_dir / "got.txt").exists() or not (node_dir / "got.txt").read_text():
        assert time.monotonic() < deadline, "the node never wrote its secret"
        time.sleep(0.1)
    return (node_dir / "got.txt").read_text()


def test_a_replacement_from_the_rebalancer_gets_the_resolved_secret_too(tmp_path):
    world = _world(tmp_path)
    spec = world.spec("secret", SPEC)
    env = world.env(TEST_NODE_SECRET=SECRET)
    assert world.fleet("up", str(spec), "--yes", "--json", env=env).returncode == 0
    (first,) = world.created("secret")
    world.cloud.preempt(first.id)
    world.cloud.advance(60)
    proc = world.fleet("rebalance", "secret", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    (replacement,) = [i for i in world.created("secret") if i.id != first.id]
    assert _written(world.home / "localcloud" / "nodes" / replacement.id) == SECRET  # not "${env:...}"
    missing = world.env()  # the rebalancer's environment lacks it
    world.cloud.preempt(replacement.id)
    world.cloud.advance(60)
    proc = world.fleet("rebalance", "secret", "--json", env=missing)
    assert proc.returncode != 0 and "TEST_NODE_SECRET" in proc.stderr and SECRET not in proc.stderr + proc.stdout


#: SPEC with the node variable named innocently and referring to the operator's own AWS key.
FORWARDING = SPEC.replace("$AWS_SECRET_ACCESS_KEY", "$HARMLESS_LOOKING").replace(
    "AWS_SECRET_ACCESS_KEY: ${{env:TEST_NODE_SECRET}}",
    "HARMLESS_LOOKING: ${{env:AWS_SECRET_ACCESS_KEY}}\n    WANDB_KEY: ${{env:TEST_NODE_SECRET}}",
)


def test_a_reference_to_a_cloud_credential_is_refused_by_spec_check_plan_and_up(tmp_path):
    world = _world(tmp_path)
    spec = world.spec("forward", FORWARDING)
    env = world.env(TEST_NODE_SECRET=SECRET, AWS_SECRET_ACCESS_KEY="operator-own-aws-secret-key")
    for args in (["spec", "check", str(spec)], ["plan", str(spec)], ["up", str(spec), "--yes"]):
        proc = world.fleet(*args, env=env)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "env.HARMLESS_LOOKING refers to ${env:AWS_SECRET_ACCESS_KEY}" in proc.stderr
        assert "node.forward_credentials" in proc.stderr and "Traceback" not in proc.stderr
        assert "operator-own-aws-secret-key" not in proc.stdout + proc.stderr
    assert world.created("forward") == []


def test_a_credential_forwarded_on_purpose_reaches_the_node_and_up_lists_every_reference(tmp_path):
    world = _world(tmp_path)
    text = FORWARDING.replace("  env:\n", "  forward_credentials: [AWS_SECRET_ACCESS_KEY]\n  env:\n", 1)
    spec = world.spec("forward", text)
    env = world.env(TEST_NODE_SECRET=SECRET, AWS_SECRET_ACCESS_KEY="operator-own-aws-secret-key")
    proc = world.fleet("up", str(spec), "--yes", env=env)
    assert proc.returncode == 0, proc.stderr
    assert (
        "forwarded to the nodes: node.env.HARMLESS_LOOKING <- ${env:AWS_SECRET_ACCESS_KEY} (a credential" in proc.stdout
    )
    assert "forwarded to the nodes: node.env.WANDB_KEY <- ${env:TEST_NODE_SECRET}" in proc.stdout
    assert "operator-own-aws-secret-key" not in proc.stdout + proc.stderr
    (instance,) = world.created("forward")
    assert _written(world.home / "localcloud" / "nodes" / instance.id) == "operator-own-aws-secret-key"
    unused = world.spec("unused", text.replace("${{env:AWS_SECRET_ACCESS_KEY}}", "plain"))
    proc = world.fleet("spec", "check", str(unused), env=env)
    assert proc.returncode == 2 and "node.forward_credentials names AWS_SECRET_ACCESS_KEY, which neither" in proc.stderr
    world.fleet_json("down", "forward", "--yes")
