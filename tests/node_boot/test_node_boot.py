"""A node boots from the start-up script an adapter really sent, with no spotfleet installed.

``fleet up`` runs as a subprocess against the fakes (moto for EC2 and S3, the fake Vast, OCI,
Lambda and RunPod servers); the script is taken from what the fake received (the EC2 instance's user data,
the Vast ask's ``onstart``, the OCI instance's ``metadata.user_data``, the Lambda launch's
cloud-init ``user_data``, the RunPod pod's container command ``args`` with its ``env``) and run by bash in a sandbox: a fresh prefix and log (the script's
``SPOTFLEET_PREFIX``/``SPOTFLEET_NODE_LOG``), the image's interpreter pinned with
``SPOTFLEET_PYTHON`` (a bare interpreter without spotfleet: 3.10 as on Ubuntu 22.04 images, 3.11
as in ``pytorch/pytorch``), a stand-in ``nvidia-smi`` that answers as the real one does, and only
loopback fakes (the clouds' APIs and metadata, the presigned URL's endpoint) plus the package
index for the wheel's dependencies, through one pip cache the tests of a session share. The test
waits until the user's command has run under ``fleet run``, then boots the node again: nothing is
reinstalled and no second agent starts.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

import aws_world  # noqa: E402
from lambda_server import API_KEY as LAMBDA_KEY  # noqa: E402
from lambda_server import LambdaServer  # noqa: E402
from metadata import FakeImds, FakeOciImds  # noqa: E402
from oci_server import COMPARTMENT, IMAGE, SUBNET, OciServer  # noqa: E402
from runpod_server import API_KEY as RUNPOD_KEY  # noqa: E402
from runpod_server import RunPodServer  # noqa: E402
from vast_server import API_KEY, VastServer  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.emulator, pytest.mark.timeout(1200)]

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))
PYENV = Path("/root/.pyenv/versions")
NVIDIA_SMI = """#!/bin/sh
# answers `--query-gpu=index,name,driver_version,memory.total --format=csv,noheader` as nvidia-smi does
echo "0, NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB"
"""
#: A container's keep-alive (a RunPod pod's command ends in ``exec sleep infinity``) returns at once
#: in the sandbox, so a boot can be waited for; any other sleep is the real one.
SLEEP = """#!/bin/sh
[ "$1" = infinity ] && exit 0
exec /bin/sleep "$@"
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
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SPOTFLEET_", "AWS_", "VAST_", "LAMBDA_", "RUNPOD_"))
    }
    env.update(SPOTFLEET_HOME=str(root / "home"), COLUMNS="200", NO_COLOR="1", **extra)
    return env


def fleet(root: Path, env: dict[str, str], *args: str) -> None:
    done = subprocess.run(
        [FLEET_BIN, *args], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300, cwd=root
    )
    assert done.returncode == 0, f"fleet {' '.join(args)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"


class Node:
    """One sandboxed node: its prefix, log, PATH and the start-up script."""

    def __init__(self, root: Path, script: str, python: str, env: dict[str, str]):
        self.root = root / "node"
        self.prefix, self.log, self.marker = self.root / "opt", self.root / "node.log", root / "marker"
        bin_dir = self.root / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "nvidia-smi").write_text(NVIDIA_SMI)
        (bin_dir / "nvidia-smi").chmod(0o755)
        (bin_dir / "sleep").write_text(SLEEP)
        (bin_dir / "sleep").chmod(0o755)
        self.script = self.root / "boot.sh"
        self.script.write_text(script)
        keep = ("PIP_", "SSL_", "REQUESTS_CA_BUNDLE")
        self.env = {k: v for k, v in os.environ.items() if k.startswith(keep)}
        self.env.update(
            env,
            PATH=f"{bin_dir}:/usr/bin:/bin",
            HOME=str(self.root),
            LANG="C.UTF-8",
            SPOTFLEET_PREFIX=str(self.prefix),
            SPOTFLEET_NODE_LOG=str(self.log),
            SPOTFLEET_PYTHON=python,
            MARKER=str(self.marker),
        )
        self.procs: list[subprocess.Popen] = []

    def boot(self) -> int:
        proc = subprocess.Popen(
            ["bash", str(self.script)],
            env=self.env,
            cwd=self.root,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(proc)
        return proc.wait(timeout=900)

    def tail(self) -> str:
        return self.log.read_text()[-4000:] if self.log.exists() else "(no node log)"

    def agent_alive(self) -> bool:
        try:
            os.kill(int((self.prefix / "agent.pid").read_text()), 0)
        except (OSError, ValueError):
            return False
        return True

    def wait_for_marker(self, timeout: float = 300) -> str:
        """The marker's text once the job wrote it; fails at once when the agent is gone without it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.marker.exists() and self.marker.read_text().strip():
                return self.marker.read_text()
            if not self.agent_alive() and not (self.marker.exists() and self.marker.read_text().strip()):
                raise AssertionError(f"fleet run ended before the job ran; node log:\n{self.tail()}")
            time.sleep(0.5)
        raise AssertionError(f"the job never ran; node log:\n{self.tail()}")

    def stop(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


#: The user's command: says it ran under ``fleet run`` (which sets the resume step), then works on.
STARTUP = """'echo "resume=${{SPOTFLEET_RESUME_STEP:-none}} fleet=$SPOTFLEET_FLEET" > "$MARKER"; exec sleep 600'"""

SPEC_AWS = (
    """
name: bootaws
backend: cloud
capacity: {{gpus: 1, accelerators: [T4], gpus_per_node: {{min: 1, max: 1}}}}
providers:
  aws: {{regions: [us-east-1], ami: {ami}, on_demand: false}}
checkpoint: {{provider: s3}}
node:
  startup: """
    + STARTUP
    + "\n"
)

SPEC_VAST = (
    """
name: bootvast
backend: cloud
capacity: {{gpus: 1, accelerators: [H100], gpus_per_node: {{min: 1, max: 1}}}}
providers:
  vast: {{min_reliability: 0.9}}
  aws: {{regions: [us-east-1], ami: {ami}, spot: false, on_demand: false}}
checkpoint: {{provider: s3}}
node:
  startup: """
    + STARTUP
    + "\n"
)

SPEC_OCI = (
    """
name: bootoci
backend: cloud
capacity: {{gpus: 1, accelerators: [A10], gpus_per_node: {{min: 1, max: 1}}}}
providers:
  oci: {{compartment_id: """
    + COMPARTMENT
    + ", subnet_id: "
    + SUBNET
    + ", image_id: "
    + IMAGE
    + """}}
  aws: {{regions: [us-east-1], ami: {ami}, spot: false, on_demand: false}}
checkpoint: {{provider: s3}}
node:
  startup: """
    + STARTUP
    + "\n"
)

SPEC_LAMBDA = (
    """
name: bootlambda
backend: cloud
capacity: {{gpus: 1, accelerators: [A10], gpus_per_node: {{min: 1, max: 1}}}}
providers:
  lambda: {{regions: [us-east-1]}}
  aws: {{regions: [us-east-1], ami: {ami}, spot: false, on_demand: false}}
checkpoint: {{provider: s3}}
node:
  startup: """
    + STARTUP
    + "\n"
)

SPEC_RUNPOD = (
    """
name: bootrunpod
backend: cloud
capacity: {{gpus: 1, accelerators: [H100], gpus_per_node: {{min: 1, max: 1}}}}
providers:
  runpod: {{clouds: [SECURE]}}
  aws: {{regions: [us-east-1], ami: {ami}, spot: false, on_demand: false}}
checkpoint: {{provider: s3}}
node:
  startup: """
    + STARTUP
    + "\n"
)

#: What a launch gives the sandboxed node: the start-up script and the environment the cloud sets.
Launched = tuple[str, dict[str, str]]


@contextmanager
def launched_on_aws(root: Path, world: aws_world.AwsWorld) -> Iterator[Launched]:
    """``fleet up`` on moto; the script is the instance's user data, IMDS a loopback fake."""
    spec = root / "spec.yaml"
    spec.write_text(SPEC_AWS.format(ami=aws_world.MOTO_AMI))
    fleet(root, cli_env(root, **world.env), "up", str(spec), "--yes", "--json")
    ec2 = world.direct("ec2")
    ids = [
        i["InstanceId"]
        for r in ec2.describe_instances()["Reservations"]
        for i in r["Instances"]
        if {"Key": "spotfleet:fleet", "Value": "bootaws"} in i.get("Tags", [])
    ]
    assert len(ids) == 1
    data = ec2.describe_instance_attribute(InstanceId=ids[0], Attribute="userData")["UserData"]["Value"]
    imds = FakeImds().start()
    try:
        # world.env stands in for the instance profile and for the DNS name of S3
        yield base64.b64decode(data).decode(), {**world.env, "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.url}
        assert any(seen.path == "/latest/api/token" for seen in imds.requests), "the node agent never asked IMDS"
    finally:
        imds.stop()


@contextmanager
def launched_on_vast(root: Path, world: aws_world.AwsWorld) -> Iterator[Launched]:
    """``fleet up`` on the fake Vast API (bucket on moto); the script is the ask's ``onstart``."""
    server = VastServer(port=0).start()
    try:
        server.state.reset(
            [
                {
                    "id": 4000,
                    "machine_id": 900,
                    "num_gpus": 1,
                    "gpu_name": "H100 SXM",
                    "gpu_ram": 81559,
                    "dph_base": 2.0,
                    "min_bid": 1.0,
                    "reliability2": 0.99,
                    "geolocation": "Texas, US",
                }
            ]
        )
        spec = root / "spec.yaml"
        spec.write_text(SPEC_VAST.format(ami=aws_world.MOTO_AMI))
        fleet(
            root,
            cli_env(root, **world.env, SPOTFLEET_VAST_URL=server.url, VAST_API_KEY=API_KEY),
            "up",
            str(spec),
            "--yes",
            "--json",
        )
        made = list(server.state.instances.values())
        assert len(made) == 1
        body = made[0]["_body"]
        # what Vast sets in every container (its id and an instance API key), plus the loopback
        # stand-ins for the names of Vast's API and of S3; the bucket's keys come in the body's env
        cloud = {
            "CONTAINER_ID": str(made[0]["id"]),
            "CONTAINER_API_KEY": API_KEY,
            "SPOTFLEET_VAST_URL": server.url,
            "AWS_ENDPOINT_URL": world.env["AWS_ENDPOINT_URL"],
        }
        yield body["onstart"], {**{k: str(v) for k, v in body["env"].items()}, **cloud}
    finally:
        server.stop()


@contextmanager
def launched_on_oci(root: Path, world: aws_world.AwsWorld) -> Iterator[Launched]:
    """``fleet up`` on the fake OCI API (bucket on moto); the script is the instance's
    ``metadata.user_data`` (base64, as cloud-init reads it), OCI's metadata service a loopback fake."""
    server = OciServer(port=0).start()
    imds = FakeOciImds().start()
    try:
        spec = root / "spec.yaml"
        spec.write_text(SPEC_OCI.format(ami=aws_world.MOTO_AMI))
        fleet(root, cli_env(root, **world.env, **server.write_config(root / "oci")), "up", str(spec), "--yes", "--json")
        made = [i for i in server.state.instances.values() if i["freeformTags"].get("spotfleet_fleet") == "bootoci"]
        assert len(made) == 1
        script = base64.b64decode(made[0]["metadata"]["user_data"]).decode()
        # the scoped bucket keys travel in the script; S3's name is a loopback stand-in
        yield script, {"AWS_ENDPOINT_URL": world.env["AWS_ENDPOINT_URL"], "SPOTFLEET_OCI_METADATA_URL": imds.url}
    finally:
        imds.stop()
        server.stop()


@contextmanager
def launched_on_lambda(root: Path, world: aws_world.AwsWorld) -> Iterator[Launched]:
    """``fleet up`` on the fake Lambda API (bucket on moto); the script is the launch's cloud-init
    ``user_data``, which carries the bucket's scoped keys itself (Lambda sets no variables)."""
    server = LambdaServer(port=0).start()
    try:
        spec = root / "spec.yaml"
        spec.write_text(SPEC_LAMBDA.format(ami=aws_world.MOTO_AMI))
        fleet(
            root,
            cli_env(root, **world.env, SPOTFLEET_LAMBDA_URL=server.url, LAMBDA_API_KEY=LAMBDA_KEY),
            "up",
            str(spec),
            "--yes",
            "--json",
        )
        made = list(server.state.instances.values())
        assert len(made) == 1
        # the loopback stand-in for the name of S3
        yield made[0]["_body"]["user_data"], {"AWS_ENDPOINT_URL": world.env["AWS_ENDPOINT_URL"]}
    finally:
        server.stop()


@contextmanager
def launched_on_runpod(root: Path, world: aws_world.AwsWorld) -> Iterator[Launched]:
    """``fleet up`` on the fake RunPod API v2 (bucket on moto); the script is the pod's command
    (``args``), run with the pod's ``env`` (the bootstrap and the bucket's scoped keys are there)."""
    server = RunPodServer(port=0).start()
    try:
        spec = root / "spec.yaml"
        spec.write_text(SPEC_RUNPOD.format(ami=aws_world.MOTO_AMI))
        fleet(
            root,
            cli_env(root, **world.env, SPOTFLEET_RUNPOD_URL=server.url, RUNPOD_API_KEY=RUNPOD_KEY),
            "up",
            str(spec),
            "--yes",
            "--json",
        )
        made = list(server.state.pods.values())
        assert len(made) == 1
        body = made[0]["_body"]
        # what RunPod sets in every pod (its id), plus the loopback stand-in for the name of S3
        cloud = {"RUNPOD_POD_ID": made[0]["id"], "AWS_ENDPOINT_URL": world.env["AWS_ENDPOINT_URL"]}
        yield body["args"] + "\n", {**body["env"], **cloud}
    finally:
        server.stop()


LAUNCHES: dict[str, Callable[[Path, aws_world.AwsWorld], AbstractContextManager[Launched]]] = {
    "aws": launched_on_aws,
    "vast": launched_on_vast,
    "oci": launched_on_oci,
    "lambda": launched_on_lambda,
    "runpod": launched_on_runpod,
}


@pytest.fixture(scope="session")
def pip_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One pip cache for every node of the session: the second node downloads nothing twice."""
    return str(tmp_path_factory.mktemp("node-pip-cache"))


# the image's Python: 3.10 as on Ubuntu 22.04 (the AWS/GCP/Azure default images and Lambda Stack 22.04),
# 3.11 as in pytorch/pytorch, 3.12 as in RunPod's PyTorch image (Ubuntu 24.04)
@pytest.mark.parametrize(
    "provider, python_version",
    [("aws", "3.10"), ("vast", "3.11"), ("oci", "3.11"), ("lambda", "3.10"), ("runpod", "3.12")],
)
def test_a_node_boots_from_the_script_its_adapter_sent(
    provider: str, python_version: str, tmp_path: Path, pip_cache: str
):
    python = bare_python(python_version)
    world = aws_world.fresh()
    with LAUNCHES[provider](tmp_path, world) as (script, env):
        node = Node(tmp_path, script, python, {**env, "PIP_CACHE_DIR": pip_cache})
        try:
            started = time.monotonic()
            assert node.boot() == 0, node.tail()
            ran = node.wait_for_marker()
            print(f"{provider}: boot -> job under fleet run in {time.monotonic() - started:.0f}s")
            assert "resume=" in ran and f"fleet=boot{provider}" in ran  # under `fleet run` (it sets the resume step)
            log = node.log.read_text()
            assert "spotfleet-boot: installing spotfleet-" in log
            assert "NVIDIA H100 80GB HBM3" in log  # the agent's first lines name the GPUs it sees
            installs = log.count("spotfleet-boot: installing")
            assert node.boot() == 0  # a reboot: nothing reinstalled, no second agent
            again = node.log.read_text()
            assert again.count("spotfleet-boot: installing") == installs
            assert "already runs" in again
            assert node.agent_alive()
        finally:
            node.stop()
