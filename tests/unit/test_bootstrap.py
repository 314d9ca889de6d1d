"""The node bootstrap, run for real by bash with a stand-in ``fleet`` already installed."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from fleet.bootstrap import NodeBoot, render, render_base64, render_gzip_base64

HOSTILE = "x'; touch PWNED; echo '\nSPOTFLEET_ENV\ntouch PWNED2 $(touch PWNED3) `touch PWNED4`"


def fake_fleet(prefix: Path, record: Path) -> None:
    """A ``fleet`` that records its argv and environment instead of running anything."""
    bin_dir = prefix / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "fleet"
    script.write_text(f"""#!/bin/bash
[ "${{1:-}}" = "--version" ] && {{ echo fleet 0; exit 0; }}
{{ printf '%s\\n' "$@"; echo ---; env; }} > {record}.tmp && mv {record}.tmp {record}
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def run_script(tmp_path: Path, boot: NodeBoot) -> tuple[list[str], dict[str, str]]:
    record = tmp_path / "record"
    fake_fleet(Path(boot.prefix), record)
    path = tmp_path / "boot.sh"
    path.write_text(render(boot))
    done = subprocess.run(["bash", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 20
    while not record.exists() and time.monotonic() < deadline:  # the job starts in the background
        time.sleep(0.05)
    argv, _, env_text = record.read_text().partition("---\n")
    env = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line)
    return argv.splitlines(), env


def boot_for(tmp_path: Path, **kw) -> NodeBoot:
    base = dict(
        fleet="train",
        pool="aws/use1-az1/p5.48xlarge",
        provider="aws",
        command="python train.py",
        checkpoint_uri="s3://ckpt/train",
        env={"MODE": "fast"},
        secret_env={"API_TOKEN": "s3cr3t"},
        prefix=str(tmp_path / "opt"),
        log_path=str(tmp_path / "node.log"),
        spotfleet="preinstalled",
    )
    return NodeBoot(**{**base, **kw})


def test_node_runs_the_job_under_fleet_run_with_identity_and_checkpoint_uri(tmp_path):
    argv, env = run_script(tmp_path, boot_for(tmp_path))
    assert argv == ["run", "--cloud", "aws", "--", "bash", "-lc", "python train.py"]
    assert env["SPOTFLEET_FLEET"] == "train"
    assert env["SPOTFLEET_POOL"] == "aws/use1-az1/p5.48xlarge"
    assert env["SPOTFLEET_CHECKPOINT_URI"] == "s3://ckpt/train"
    assert env["MODE"] == "fast" and env["API_TOKEN"] == "s3cr3t"
    saved = Path(tmp_path / "opt" / "env")
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    probe = subprocess.run(
        ["bash", "-c", f'. {saved}; echo "$SPOTFLEET_FLEET|$MODE"'], capture_output=True, text=True, check=True
    )
    assert probe.stdout.strip() == "train|fast"


def test_hostile_values_are_data_not_commands(tmp_path):
    boot = boot_for(tmp_path, command=HOSTILE, env={"MODE": HOSTILE}, fleet="f", pool=HOSTILE)
    argv, env = run_script(tmp_path, boot)
    assert not list(tmp_path.glob("PWNED*"))
    assert argv[-1] == HOSTILE.split("\n")[0] or "\n".join(argv[6:]) == HOSTILE
    saved = subprocess.run(
        ["bash", "-c", f'. {tmp_path / "opt" / "env"}; printf %s "$MODE"'],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert saved.stdout == HOSTILE
    assert not list(tmp_path.glob("PWNED*"))


def test_rendering_is_deterministic_and_encodings_round_trip(tmp_path):
    import base64
    import gzip

    boot = boot_for(tmp_path)
    assert render(boot) == render(boot_for(tmp_path))
    assert base64.b64decode(render_base64(boot)).decode() == render(boot)
    assert gzip.decompress(base64.b64decode(render_gzip_base64(boot))).decode() == render(boot)


def test_describe_never_shows_secret_values(tmp_path):
    described = boot_for(tmp_path).describe()
    assert "s3cr3t" not in repr(described)
    assert described["secret_env"] == {"API_TOKEN": "***"}


@pytest.mark.parametrize("bad", [{"provider": "moon"}, {"env": {"BAD NAME": "x"}}, {"secret_env": {"1X": "y"}}])
def test_bad_input_is_refused(tmp_path, bad):
    with pytest.raises(ValueError):
        boot_for(tmp_path, **bad)


def test_without_a_command_the_node_runs_only_the_agent(tmp_path):
    argv, _ = run_script(tmp_path, boot_for(tmp_path, command="", provider="gcp"))
    assert argv == ["run", "--cloud", "gcp", "--", "sleep", "infinity"]
    assert os.path.exists(tmp_path / "node.log")


def test_boot_for_a_launch_request_carries_pool_command_and_checkpoint():
    from fleet.bootstrap import boot_for
    from fleet.model import LaunchRequest, Market, NodeConfig, Offer, PoolKey

    offer = Offer(
        pool=PoolKey(
            provider="aws", region="us-east-1", zone="use1-az1", instance_type="p5.48xlarge", market=Market.SPOT
        ),
        accelerator="H100",
        gpus=8,
        price_per_hour=30.0,
    )
    request = LaunchRequest(
        fleet="train",
        offer=offer,
        count=2,
        token="t1",
        node=NodeConfig(startup="python train.py", env={"A": "1"}, checkpoint_uri="s3://b/train"),
    )
    boot = boot_for("aws", request, secret_env={"K": "v"})
    assert (boot.pool, boot.command, boot.checkpoint_uri) == (offer.pool.id, "python train.py", "s3://b/train")
    assert boot.variables()["K"] == "v" and boot.env == {"A": "1"}
