"""``fleet run`` refuses what cannot work before starting anything: checkpoint storage that does not
exist or cannot be reached, and lock names that would leave the lock folder."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from agent_support import FLEET, env

from fleet.agent.checkpoints import CheckpointProbe
from fleet.agent.notice import Notice
from fleet.agent.runner import effective_margin, respond
from fleet.checkpoint import CheckpointManager

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
import storage_emulators as emu  # noqa: E402

MARKER_JOB = [sys.executable, "-c", "print('the job ran')"]


def fleet_run(home: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLEET, "run", "--cloud", "none", "--backoff", "0.01", *args, "--", *MARKER_JOB],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(home, **extra_env),
    )


@pytest.fixture(scope="module")
def moto():
    try:
        server = emu.start_moto()
    except emu.EmulatorUnavailable as err:
        if emu.in_ci():
            pytest.fail(str(err))
        pytest.skip(str(err))
    yield server
    server.stop()


def test_a_missing_bucket_is_one_line_and_no_job_starts(tmp_path, moto):
    run = fleet_run(tmp_path / "home", "--checkpoint-uri", "s3://no-such-bucket/run1", **moto.env)
    assert run.returncode == 1
    assert "the job ran" not in run.stdout + run.stderr and "restart" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        "error: checkpoint storage cannot be used: s3://no-such-bucket/run1: bucket 'no-such-bucket' does not "
        "exist; create it (fleet up creates the fleet's bucket) or fix the URI"
    ]


def test_an_unreachable_store_is_one_line_and_no_job_starts(tmp_path):
    run = fleet_run(
        tmp_path / "home",
        "--checkpoint-uri",
        "s3://bucket/run1",
        AWS_ENDPOINT_URL_S3="http://127.0.0.1:9",
        AWS_ACCESS_KEY_ID="x",
        AWS_SECRET_ACCESS_KEY="y",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_MAX_ATTEMPTS="1",
    )
    assert run.returncode == 1 and "the job ran" not in run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: checkpoint storage cannot be used: s3://bucket/run1")
    assert "Traceback" not in run.stderr


def test_a_reachable_store_still_runs_the_job(tmp_path):
    run = fleet_run(tmp_path / "home", "--checkpoint-uri", f"file://{tmp_path / 'ckpt'}")
    assert run.returncode == 0 and "the job ran" in run.stdout


@pytest.mark.parametrize("name", ["../../escaped", "{tmp}/abs", "a/b", ".hidden", "-dash", "x" * 200, ""])
def test_lock_names_are_plain_names(tmp_path, name):
    home = tmp_path / "home"
    run = fleet_run(home, "--name", name.format(tmp=tmp_path))
    assert run.returncode == 64 and "the job ran" not in run.stdout  # a usage error (EX_USAGE)
    assert "--name" in run.stderr and "is not a plain name" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "escaped.lock").exists() and not (tmp_path / "abs.lock").exists()
    assert not (home / "run").exists()  # nothing written anywhere


def test_a_plain_name_is_used_for_the_lock(tmp_path):
    home = tmp_path / "home"
    assert fleet_run(home, "--name", "train-1.v2").returncode == 0
    assert (home / "run" / "train-1.v2.lock").exists()


def test_the_margin_scales_with_a_short_notice_window(tmp_path):
    """The local cloud at x60 gives 0.5 s of wall time for a GCE notice: the default 5 s margin must
    not end the wait before it begins."""
    uri = f"file://{tmp_path / 'ckpt'}"
    notice = Notice(kind="terminate", cloud="local", deadline=time.time() + 0.5)
    assert effective_margin(5.0, notice) <= 0.125
    assert effective_margin(5.0, Notice(kind="terminate", cloud="gcp", deadline=time.time() + 30)) == 5.0
    threading.Timer(0.1, lambda: CheckpointManager(uri).save({"x": 1}, 7)).start()
    outcome = respond(notice, None, probe=CheckpointProbe(uri), margin=5.0, poll=0.02)
    assert outcome.checkpoint_committed and outcome.checkpoint_step == 7
