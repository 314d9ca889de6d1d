"""The notice reaches a Lightning job through ``fleet run``: SIGTERM -> FleetCheckpoint's final save.

``fleet run`` watches the fake IMDS; on a spot interruption it signals the job (a real
``pytorch_lightning`` Trainer with :class:`FleetCheckpoint`) and waits until its final checkpoint
is committed. Skipped where the ``lightning`` extra is absent.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from agent_support import FLEET, env, finish, last_step, start, trailing_json, wait_until

from fleet.checkpoint import CheckpointManager

pytest.importorskip("pytorch_lightning")
JOB = Path(__file__).with_name("lightning_job.py")


def test_a_notice_makes_the_lightning_job_commit_its_step_before_the_deadline(tmp_path, imds):
    log, uri = tmp_path / "run.log", f"file://{tmp_path / 'ckpt'}"
    run = start(
        [
            *FLEET,
            "run",
            "--cloud",
            "aws",
            "--metadata-url",
            imds.url,
            "--poll-interval",
            "0.1",
            "--checkpoint-uri",
            uri,
            "--json",
            "--",
            sys.executable,
            str(JOB),
        ],
        log,
        env(tmp_path / "home"),
    )
    wait_until(lambda: last_step(log) >= 7, timeout=120, what="training past the first periodic save")
    deadline = imds.schedule_action("terminate", 60)
    assert finish(run, timeout=90) == 0, log.read_text()[-3000:]

    notice = trailing_json(log)["notices"][0]
    newest = CheckpointManager(uri).latest()
    assert (notice["hook_ok"], notice["checkpoint_committed"]) == (True, True)
    assert notice["checkpoint_step"] == newest.step == last_step(log)  # the step it stopped at, not step 5
    assert newest.step > 5 and newest.committed_at < deadline
