"""`fleet check aws` against moto (through the EC2 proxy): identity, price, launch rights by DryRun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

import aws_world  # noqa: E402

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))


def _check(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run(
        [FLEET_BIN, "check", "aws", *args], env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def test_check_reports_identity_price_and_launch_rights():
    world = aws_world.fresh()
    proc = _check(world.env, "--json")
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert result["ok"] and result["identity"].startswith("arn:aws:")
    assert result["can_price"] is True and result["can_launch"] is True
    assert "on-demand prices from the snapshot" in result["detail"]  # moto has no Price List API
    assert "testing" not in proc.stdout  # no secret in the output


def test_missing_credentials_fail_with_the_fix_and_no_traceback(tmp_path):
    world = aws_world.fresh()
    env = {
        "AWS_ENDPOINT_URL": world.env["AWS_ENDPOINT_URL"],
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    proc = _check(env)
    assert proc.returncode == 1
    assert proc.stdout.startswith("aws    not configured") and "no AWS credentials" in proc.stdout
    assert "fix: configure credentials" in proc.stdout and "Traceback" not in proc.stderr
