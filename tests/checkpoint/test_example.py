"""The readiness checklist on the real example job (examples/train_resumable.py, subprocesses):

- kill test: ``kill -9`` mid-training, start it again, it resumes at the newest committed step;
- metric continuity: the resumed loss curve is bit-identical to an uninterrupted run;
- final save on notice: SIGTERM/SIGUSR1 -> final checkpoint at the current step, exit 0;
- durable storage: the same against S3 (moto), located only through the environment.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.checkpoint import CheckpointManager

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_resumable.py"
STEPS, SAVE_EVERY = 60, 5


def job_env(location) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "STORAGE_EMULATOR", "AZURE_"))}
    env.update(location.env)
    env["SPOTFLEET_CHECKPOINT_URI"] = location.uri
    env["PYTHONPATH"] = str(ROOT)
    return env


def command(*extra: str) -> list[str]:
    return [
        sys.executable,
        str(EXAMPLE),
        "--backend",
        "numpy",
        "--steps",
        str(STEPS),
        "--save-every",
        str(SAVE_EVERY),
        *extra,
    ]


def losses(output: str) -> dict[int, str]:
    """step -> loss text (the exact float repr printed by the job)."""
    out = {}
    for line in output.splitlines():
        if line.startswith("step "):
            _, step, _, loss = line.split()
            out[int(step)] = loss
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[int, str]:
    """The uninterrupted run's loss curve."""
    uri = f"file://{tmp_path_factory.mktemp('reference')}"
    run = subprocess.run(command("--uri", uri), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    curve = losses(run.stdout)
    assert sorted(curve) == list(range(1, STEPS + 1))
    return curve


def run_until(env: dict[str, str], stop_at: int, how: signal.Signals) -> tuple[subprocess.Popen, list[str]]:
    """Start the job, read its output until it prints ``step stop_at``, then send ``how``."""
    proc = subprocess.Popen(
        command("--step-time", "0.01"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines = []
    sent = False
    assert proc.stdout is not None
    # read on to the end through the same reader: lines it buffered past ``step stop_at`` (a loaded
    # machine lets the job print a step more before the signal lands) are never lost
    for line in proc.stdout:
        lines.append(line)
        if not sent and line.startswith(f"step {stop_at} "):
            proc.send_signal(how)
            sent = True
    proc.communicate(timeout=60)
    return proc, lines


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_kill9_resume_continues_the_loss_curve_bit_identically(location_factory, reference, kind):
    location = location_factory(kind)
    env = job_env(location)
    rng = random.Random(f"kill-{kind}")
    seen: dict[int, str] = {}
    kills = sorted(rng.sample(range(8, STEPS - 5), 3))
    resumed_at: list[int] = []
    for kill_at in kills:  # kill -9 three times, restarting with no manual step
        proc, out = run_until(env, kill_at, signal.SIGKILL)
        assert proc.returncode == -signal.SIGKILL
        printed = losses("".join(out))
        seen.update(printed)
        newest = CheckpointManager(location.uri, env=location.env).latest()
        assert newest is not None and newest.step <= max(printed)
        resumed_at.append(newest.step)
    final = subprocess.run(command(), env=env, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    assert f"resumed from step {resumed_at[-1]} " in final.stdout
    seen.update(losses(final.stdout))
    assert seen == reference  # every step, before and after each kill, bit for bit
    assert CheckpointManager(location.uri, env=location.env).latest().step == STEPS


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGUSR1])
def test_notice_signal_writes_a_final_checkpoint_and_exits_zero(location_factory, reference, how):
    location = location_factory("file")
    env = job_env(location)
    stop_at = 17  # not a multiple of --save-every
    proc, out = run_until(env, stop_at, how)
    text = "".join(out)
    assert proc.returncode == 0, text
    last = max(losses(text))
    assert last >= stop_at
    assert f"stopped by {how.name} at step {last}; checkpoint committed" in text
    assert CheckpointManager(location.uri, env=location.env).latest().step == last
    again = subprocess.run(command(), env=env, capture_output=True, text=True, timeout=120)
    assert f"resumed from step {last} " in again.stdout
    assert losses(text) | losses(again.stdout) == reference


def test_missing_uri_is_one_line_error():
    env = {k: v for k, v in os.environ.items() if k != "SPOTFLEET_CHECKPOINT_URI"}
    env["PYTHONPATH"] = str(ROOT)
    run = subprocess.run(command(), env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "SPOTFLEET_CHECKPOINT_URI" in run.stderr


def test_a_finished_run_started_again_resaves_nothing(location_factory):
    """The final save of a step the run already committed (here: the resumed one) is a no-op."""
    location = location_factory("file")
    env = job_env(location)
    first = subprocess.run(command("--steps", "10"), env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    saved = location.store().list("data/")
    again = subprocess.run(command("--steps", "10"), env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "resumed from step 10 " in again.stdout and "finished at step 10" in again.stdout
    assert location.store().list("data/") == saved  # nothing uploaded again
