"""A node boots from the start-up script an adapter really sent, with no spotfleet installed.

``fleet up`` runs as a subprocess against the fakes (moto for EC2 and S3, the fake Vast server);
the script is taken from what the fake received (the EC2 instance's user data, the Vast ask's
``onstart``) and run by bash in a sandbox: a fresh prefix and log (the script's
``SPOTFLEET_PREFIX``/``SPOTFLEET_NODE_LOG``), the image's interpreter pinned with
``SPOTFLEET_PYTHON`` (a bare interpreter without spotfleet: 3.10 as on Ubuntu 22.04 images, 3.11
as in ``pytorch/pytorch``), a stand-in ``nvidia-smi`` that answers as the real one does, and only
loopback fakes plus the package index for the wheel's dependencies. The test waits until the
user's command has run under ``fleet run``, then boots the node again: nothing is reinstalled and
no second agent starts.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

import aws_world  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))
PYENV = Path("/root/.pyenv/versions")
NVIDIA_SMI = """#!/bin/sh
# answers `--query-gpu=index,name,driver_version,memory.total --format=csv,noheader` as nvidia-smi does
echo "0, NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB"
"""


def bare_python(version: str) -> str:
    """An interpreter of ``version`` that has no spotfleet (skip when this machine has none)."""
    found = sorted(PYENV.glob(f"{version}.*/bin/python3"))
    if not found:
        pytest.skip(f"no Python {version} here")
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    probe = subprocess.run([str(found[-1]), "-c", "import fleet"], capture_output=True, env=clean, cwd="/")
    assert probe.returncode != 0, f"{found[-1]} can import fleet: not a bare interpreter"
    return str(found[-1])


def cli_env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPOTFLEET_", "AWS_", "VAST_"))}
    env.update(SPOTFLEET_HOME=str(root / "home"), COLUMNS="200", NO_COLOR="1", **extra)
    return env


def fleet(root: Path, env: dict[str, str], *args: str) -> None:
    done = subprocess.run([FLEET_BIN, *args], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=300, cwd=root)
    assert done.returncode == 0, f"fleet {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"


class Node:
    """One sandboxed node: its prefix, log, PATH and the start-up script."""

    def __init__(self, root: Path, script: str, python: str, fakes_env: dict[str, str]):
        self.root = root / "node"
        self.prefix, self.log, self.marker = self.root / "opt", self.root / "node.log", root / "marker"
        bin_dir = self.root / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "nvidia-smi").write_text(NVIDIA_SMI)
        (bin_dir / "nvidia-smi").chmod(0o755)
        self.script = self.root / "boot.sh"
        self.script.write_text(script)
        keep = ("PIP_", "SSL_", "REQUESTS_CA_BUNDLE")
        self.env = {k: v for k, v in os.environ.items() if k.startswith(keep)}
        self.env.update(fakes_env, PATH=f"{bin_dir}:/usr/bin:/bin", HOME=str(self.root), LANG="C.UTF-8",
                        SPOTFLEET_PREFIX=str(self.prefix), SPOTFLEET_NODE_LOG=str(self.log),
                        SPOTFLEET_PYTHON=python, MARKER=str(self.marker))
        self.procs: list[subprocess.Popen] = []

    def boot(self) -> int:
        proc = subprocess.Popen(["bash", str(self.script)], env=self.env, cwd=self.root, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc.wait(timeout=900)

    def wait_for_marker(self, timeout: float = 300) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.marker.exists() and self.marker.read_text().strip():
                return self.marker.read_text()
            time.sleep(0.5)
        raise AssertionError(f"the job never ran; node log:\n{self.log.read_text()[-4000:]}")

    def stop(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def check_boot(node: Node) -> None:
    """Boot, wait for the job, boot again; the log says what happened, with timestamps."""
    try:
        assert node.boot() == 0, node.log.read_text()[-4000:]
        ran = node.wait_for_marker()
        assert "resume=" in ran                       # the job ran under `fleet run` (it sets the resume step)
        log = node.log.read_text()
        assert "spotfleet-boot: installing spotfleet-" in log
        assert "NVIDIA H100 80GB HBM3" in log         # the agent's first lines name the GPUs it sees
        installs = log.count("spotfleet-boot: installing")
        assert node.boot() == 0
        again = node.log.read_text()
        assert again.count("spotfleet-boot: installing") == installs
        assert "already runs" in again
    finally:
        node.stop()


SPEC_AWS = """
name: bootaws
backend: cloud
capacity: {{gpus: 1, accelerators: [T4], gpus_per_node: {{min: 1, max: 1}}}}
providers:
  aws: {{regions: [us-east-1], ami: {ami}, on_demand: false}}
checkpoint: {{provider: s3}}
node:
  startup: 'echo "resume=${{SPOTFLEET_RESUME_STEP:-none}} fleet=$SPOTFLEET_FLEET" > "$MARKER"'
"""


@pytest.mark.emulator
def test_an_ec2_node_boots_from_its_user_data_on_the_images_python_3_10(tmp_path: Path):
    python = bare_python("3.10")
    try:
        world = aws_world.shared()
    except aws_world.AwsUnavailable as err:
        pytest.skip(str(err))
    world.reset()
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC_AWS.format(ami=aws_world.MOTO_AMI))
    fleet(tmp_path, cli_env(tmp_path, **world.env), "up", str(spec), "--yes", "--json")
    ec2 = world.direct("ec2")
    ids = [i["InstanceId"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
           if {"Key": "spotfleet:fleet", "Value": "bootaws"} in i.get("Tags", [])]
    assert len(ids) == 1
    data = ec2.describe_instance_attribute(InstanceId=ids[0], Attribute="userData")["UserData"]["Value"]
    node = Node(tmp_path, base64.b64decode(data).decode(), python, {**world.env, "AWS_EC2_METADATA_DISABLED": "true"})
    check_boot(node)


SPEC_VAST = """
name: bootvast
backend: cloud
capacity: {{gpus: 1, accelerators: [H100], gpus_per_node: {{min: 1, max: 1}}}}
providers:
  vast: {{min_reliability: 0.9}}
  aws: {{regions: [us-east-1], ami: {ami}, spot: false, on_demand: false}}
checkpoint: {{provider: s3}}
node:
  startup: 'echo "resume=${{SPOTFLEET_RESUME_STEP:-none}} fleet=$SPOTFLEET_FLEET" > "$MARKER"'
"""


@pytest.mark.emulator
def test_a_vast_node_boots_from_its_onstart_on_python_3_11(tmp_path: Path):
    from vast_server import API_KEY, VastServer

    python = bare_python("3.11")
    try:
        world = aws_world.shared()
    except aws_world.AwsUnavailable as err:
        pytest.skip(str(err))
    world.reset()
    server = VastServer(port=0).start()
    try:
        server.state.reset([{"id": 4000, "machine_id": 900, "num_gpus": 1, "gpu_name": "H100 SXM", "gpu_ram": 81559,
                             "dph_base": 2.0, "min_bid": 1.0, "reliability2": 0.99, "geolocation": "Texas, US"}])
        spec = tmp_path / "spec.yaml"
        spec.write_text(SPEC_VAST.format(ami=aws_world.MOTO_AMI))
        env = cli_env(tmp_path, **world.env, SPOTFLEET_VAST_URL=server.url, VAST_API_KEY=API_KEY)
        fleet(tmp_path, env, "up", str(spec), "--yes", "--json")
        made = list(server.state.instances.values())
        assert len(made) == 1
        onstart, vast_env = made[0]["_body"]["onstart"], made[0]["_body"]["env"]
        vast_env = {**vast_env, "CONTAINER_ID": str(made[0]["id"])}     # what Vast sets in every container
    finally:
        server.stop()
    node = Node(tmp_path, onstart, python, {**{k: str(v) for k, v in vast_env.items()}})
    check_boot(node)
