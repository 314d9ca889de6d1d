"""Vast nodes checkpointing to S3 get a per-fleet IAM user's key for the fleet's prefix, never the
operator's own keys (the rebalancer's replacements the same key); `fleet down` deletes that user (issue 28, part 3). The real CLI as a
subprocess against the fake Vast server and moto (behind the EC2 proxy) together."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

import aws_world  # noqa: E402
from vast_server import API_KEY, VastServer  # noqa: E402

from providers.aws.node_credentials import user_name  # noqa: E402

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))
ASKS = [
    {
        "id": 4000 + n,
        "machine_id": 900 + n,
        "num_gpus": 1,
        "gpu_name": "H100 SXM",
        "gpu_ram": 81559,
        "dph_base": 1.5,
        "min_bid": 0.5,
        "reliability2": 0.99,
        "geolocation": "Texas, US",
    }
    for n in range(3)
]
SPEC = f"""
name: vs3
backend: cloud
capacity:
  gpus: 2
  accelerators: [H100]
  gpus_per_node: {{min: 1, max: 1}}
providers:
  vast: {{min_reliability: 0.9}}
  aws: {{regions: [us-east-1], ami: {aws_world.MOTO_AMI}, on_demand: false}}
checkpoint:
  provider: s3
"""


@pytest.fixture
def vast():
    srv = VastServer(port=0).start()
    httpx.post(f"{srv.url}/_control/reset", json={"asks": ASKS}).raise_for_status()
    yield srv
    srv.stop()


def _fleet(root: Path, world: aws_world.AwsWorld, vast: VastServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPOTFLEET_", "AWS_", "VAST_"))}
    env.update(
        world.env,
        SPOTFLEET_HOME=str(root / "home"),
        SPOTFLEET_CACHE_DIR=str(root / "cache"),
        NO_COLOR="1",
        COLUMNS="200",
        SPOTFLEET_VAST_URL=vast.url,
        VAST_API_KEY=API_KEY,
    )
    return subprocess.run(
        [FLEET_BIN, *args], env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=240
    )


def test_vast_nodes_get_the_fleets_scoped_key_and_down_revokes_it(tmp_path: Path, vast: VastServer):
    world = aws_world.fresh()
    world.proxy.prices({}, default=5.0)  # AWS spot far dearer: the fleet goes to Vast
    spec = tmp_path / "vs3.yaml"
    spec.write_text(SPEC)
    up = _fleet(tmp_path, world, vast, "up", str(spec), "--yes")
    assert up.returncode == 0, up.stdout + up.stderr
    iam = world.direct("iam")
    [key] = iam.list_access_keys(UserName=user_name("vs3"))["AccessKeyMetadata"]
    bodies = [i["create_body"] for i in httpx.get(f"{vast.url}/_control/instances").json()["instances"]]
    assert len(bodies) == 2
    for body in bodies:
        env = body["env"]
        assert env["AWS_ACCESS_KEY_ID"] == key["AccessKeyId"] != aws_world.CREDENTIALS["AWS_ACCESS_KEY_ID"]
        assert env["AWS_SECRET_ACCESS_KEY"] != aws_world.CREDENTIALS["AWS_SECRET_ACCESS_KEY"]
    policy = iam.get_user_policy(UserName=user_name("vs3"), PolicyName="spotfleet-checkpoint-prefix")["PolicyDocument"]
    assert "arn:aws:s3:::vs3-checkpoints/vs3/*" in str(policy)
    secret = bodies[0]["env"]["AWS_SECRET_ACCESS_KEY"]
    assert secret not in up.stdout + up.stderr
    assert all(secret.encode() not in p.read_bytes() for p in (tmp_path / "home").rglob("*") if p.is_file())

    # one zone (all asks in Texas) holds half the spot part, so the fleet is one spot node and one
    # on-demand node, launched in parallel (either may get the first id); the on-demand host goes away
    instances = httpx.get(f"{vast.url}/_control/instances").json()["instances"]
    assert sorted(i["is_bid"] for i in instances) == [False, True]
    [lost] = [i["id"] for i in instances if not i["is_bid"]]
    httpx.delete(f"{vast.url}/api/v0/instances/{lost}/", headers={"Authorization": f"Bearer {API_KEY}"})
    rebalance = _fleet(tmp_path, world, vast, "rebalance", "vs3")
    assert rebalance.returncode == 0, rebalance.stdout + rebalance.stderr
    replacements = [i for i in httpx.get(f"{vast.url}/_control/instances").json()["instances"] if not i["destroyed"]]
    assert len(replacements) == 2 and lost not in [i["id"] for i in replacements]
    assert all(i["create_body"]["env"]["AWS_ACCESS_KEY_ID"] == key["AccessKeyId"] for i in replacements)

    down = _fleet(tmp_path, world, vast, "down", "vs3", "--yes")
    assert down.returncode == 0, down.stdout + down.stderr
    assert [u for u in iam.list_users()["Users"] if u["UserName"] == user_name("vs3")] == []
