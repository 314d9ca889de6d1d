"""The CLI's AWS world: ``fleet`` as a subprocess whose boto3 reaches moto behind the EC2 fault
proxy (tests/fakes/aws_world.py), with spot prices set per zone there. ``AwsCli`` writes the spec,
runs ``fleet`` and reads what EC2 holds; the ``aws_cli`` fixture (tests/cli/conftest.py) makes one.
``AwsLifecycle`` is that world as the shared lifecycle suite drives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

import aws_world  # noqa: E402
from cli.lifecycle_world import LifecycleWorld  # noqa: E402

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))
REGION = "us-east-1"

#: 4 single-T4 nodes over at least two pools; g4dn.xlarge is cheapest in us-east-1b, then 1c, then 1d.
SPEC = f"""
name: {{name}}
backend: cloud
capacity:
  gpus: 4
  accelerators: {{{{T4: 1.0}}}}
  gpus_per_node: {{{{min: 1, max: 1}}}}
diversification:
  max_pool_share: 0.5
providers:
  aws:
    regions: [{REGION}]
    ami: {aws_world.MOTO_AMI}
    on_demand: false
checkpoint:
  provider: s3
"""
PRICES = {"g4dn.xlarge us-east-1b": 0.20, "g4dn.xlarge us-east-1c": 0.21, "g4dn.xlarge us-east-1d": 0.22}


class AwsCli:
    def __init__(self, root: Path, world: aws_world.AwsWorld):
        self.root = root
        self.world = world

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPOTFLEET_", "AWS_"))}
        env.update(
            self.world.env,
            SPOTFLEET_HOME=str(self.root / "home"),
            SPOTFLEET_CACHE_DIR=str(self.root / "cache"),
            COLUMNS="200",
            NO_COLOR="1",
            **extra,
        )
        return env

    def spec(self, name: str = "awsfleet") -> str:
        path = self.root / f"{name}.yaml"
        path.write_text(SPEC.format(name=name))
        return str(path)

    def fleet(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [FLEET_BIN, *args],
            env=self.env(**extra),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=240,
        )

    def fleet_json(self, *args: str, ok: tuple[int, ...] = (0,)) -> Any:
        proc = self.fleet(*args, "--json")
        assert proc.returncode in ok, f"fleet {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return json.loads(proc.stdout)

    def ec2_instances(self, fleet: str | None = None) -> list[dict[str, Any]]:
        """Every instance in moto (any state); with ``fleet``, only those tagged with it."""
        filters = [{"Name": "tag:spotfleet:fleet", "Values": [fleet]}] if fleet else []
        got = self.world.direct("ec2", REGION).describe_instances(Filters=filters)
        return [i for r in got["Reservations"] for i in r["Instances"]]

    def alive_by_pool(self, fleet: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for i in self.ec2_instances(fleet):
            if i["State"]["Name"] in ("pending", "running"):
                pool = {t["Key"]: t["Value"] for t in i["Tags"]}["spotfleet:pool"]
                out[pool] = out.get(pool, 0) + 1
        return out


def pool_of(zone_name: str) -> str:
    """The planner's pool name of g4dn.xlarge spot in ``zone_name``."""
    zone_id = {"us-east-1b": "use1-az1", "us-east-1c": "use1-az2", "us-east-1d": "use1-az4"}[zone_name]
    return f"aws/{REGION}/{zone_id}/g4dn.xlarge/spot"


class AwsLifecycle(LifecycleWorld):
    """The AWS world as ``tests/cli/test_provider_lifecycle.py`` drives it: the fleet ``awsfleet``
    of 4 spot T4s, what EC2 holds by fleet tag, and an untagged instance someone else runs."""

    fleet_name, size = "awsfleet", 4
    crash_points = ("launch-recorded", "launch-sent", "instances-recorded")

    def __init__(self, root: Path, cli: AwsCli):
        self.cli = cli
        self.spec, self.home = Path(cli.spec()), root / "home"
        self.fleet, self.fleet_json = cli.fleet, cli.fleet_json  # type: ignore[method-assign]
        self.foreign: list[str] = []

    def ec2(self) -> Any:
        return self.cli.world.direct("ec2", REGION)

    def ours(self, *, live: bool = True) -> list[dict]:
        return [
            i
            for i in self.cli.ec2_instances(self.fleet_name)
            if not live or i["State"]["Name"] in ("pending", "running")
        ]

    def ids(self, items: list[dict]) -> list[str]:
        return sorted(i["InstanceId"] for i in items)

    def foreign_alive(self) -> bool:
        states = {i["InstanceId"]: i["State"]["Name"] for i in self.cli.ec2_instances()}
        return all(states[f] == "running" for f in self.foreign)

    def before_up(self) -> None:
        run = self.ec2().run_instances(ImageId=aws_world.MOTO_AMI, InstanceType="g4dn.xlarge", MinCount=1, MaxCount=1)
        self.foreign = [run["Instances"][0]["InstanceId"]]

    def check_up(self, report: dict, ours: list[dict]) -> None:
        assert report["desired"] == {pool_of("us-east-1b"): 2, pool_of("us-east-1c"): 2}
        assert self.cli.alive_by_pool(self.fleet_name) == report["desired"]
        for inst in ours:
            tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
            assert inst["InstanceLifecycle"] == "spot" and tags["spotfleet:plan"] == report["plan_id"]
        # the checkpoint bucket exists, locked down, and nodes get its URI
        s3 = self.cli.world.direct("s3")
        block = s3.get_public_access_block(Bucket="awsfleet-checkpoints")["PublicAccessBlockConfiguration"]
        assert block["BlockPublicAcls"]
        assert self.cli.world.direct("iam").get_instance_profile(InstanceProfileName="spotfleet-awsfleet-checkpoints")

    def check_rerun(self, report: dict, first: dict | None = None) -> None:
        assert self.cli.alive_by_pool(self.fleet_name) == report["desired"]

    def check_status(self, status: dict, planned: int) -> None:
        assert json.dumps(status).count("running") >= 4

    def check_down(self, down, ours, outputs) -> None:
        assert self.ec2().describe_launch_templates()["LaunchTemplates"] == []  # nothing left behind
