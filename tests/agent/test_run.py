"""``fleet run`` end to end: resume after kill -9, give up after N crashes, one wrapper per node,
a notice through the agent running alongside, advice (rebalance) followed by a restart."""

from __future__ import annotations

import json
import os
import signal
import sys

import numpy as np
from agent_support import FLEET, env, finish, job_argv, last_step, start, trailing_json, wait_until

from fleet.checkpoint import CheckpointManager


def lock_holder(home) -> dict:
    locks = list((home / "run").glob("*.lock"))
    if not locks:
        return {}
    try:
        return json.loads(locks[0].read_text() or "{}")
    except ValueError:
        return {}


def resumed_steps(log) -> list[int]:
    return [int(line.split()[3]) for line in log.read_text().splitlines() if line.startswith("resumed from step")]


def test_restarts_after_kill_9_and_resumes_at_the_newest_checkpoint(tmp_path):
    home, log = tmp_path / "home", tmp_path / "run.log"
    uri = f"file://{tmp_path / 'ckpt'}"
    run = start(
        [
            *FLEET,
            "run",
            "--cloud",
            "none",
            "--checkpoint-uri",
            uri,
            "--backoff",
            "0.1",
            "--json",
            "--",
            *job_argv(uri, steps=80, save_every=10),
        ],
        log,
        env(home),
    )
    wait_until(lambda: last_step(log) >= 35, what="steps past the third checkpoint")
    first_job = lock_holder(home)["job_pid"]
    os.kill(first_job, signal.SIGKILL)
    wait_until(lambda: resumed_steps(log), what="the restarted job to resume")
    assert finish(run) == 0, log.read_text()

    result = trailing_json(log)
    resumed = resumed_steps(log)[0]
    assert (result["status"], result["starts"], result["restarts"]) == ("finished", 2, 1)
    assert result["resume_steps"] == [0, resumed]  # exported SPOTFLEET_RESUME_STEP = what the job found
    assert resumed >= 30 and resumed % 10 == 0
    assert "finished at step 80" in log.read_text()
    assert CheckpointManager(uri).latest().step == 80


def test_gives_up_after_max_restarts_with_the_jobs_exit_code(tmp_path):
    log = tmp_path / "run.log"
    job = [sys.executable, "-c", "import os; print('resume', os.environ['SPOTFLEET_RESUME_STEP']); raise SystemExit(3)"]
    run = start(
        [*FLEET, "run", "--cloud", "none", "--max-restarts", "2", "--backoff", "0.01", "--json", "--", *job],
        log,
        env(tmp_path),
    )
    assert finish(run) == 3
    result = trailing_json(log)
    assert (result["status"], result["starts"], result["restarts"]) == ("failed", 3, 3)
    assert log.read_text().count("resume 0") == 3
    assert "last with exit code 3; giving up" in result["message"]


def test_the_resume_step_is_the_checkpoint_a_loader_uses_past_a_corrupt_newest(tmp_path):
    uri = f"file://{tmp_path / 'ckpt'}"
    mgr = CheckpointManager(uri)
    for step in (1980, 2000):
        mgr.save({"w": np.full(1000, step)}, step)
    newest = tmp_path / "ckpt" / mgr.latest().data_key
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0xFF  # same size, fails its checksum
    newest.write_bytes(data)
    log = tmp_path / "run.log"
    job = [sys.executable, "-c", "import os; print('resume', os.environ['SPOTFLEET_RESUME_STEP'])"]
    run = start([*FLEET, "run", "--cloud", "none", "--checkpoint-uri", uri, "--json", "--", *job], log, env(tmp_path))
    assert finish(run) == 0, log.read_text()
    assert "resume 1980" in log.read_text()
    assert trailing_json(log)["resume_steps"] == [1980]


def test_the_restart_count_starts_again_after_a_healthy_run(tmp_path):
    log, count = tmp_path / "run.log", tmp_path / "starts"
    job = [
        sys.executable,
        "-c",
        (
            "import pathlib, sys, time; p = pathlib.Path(sys.argv[1]); n = int(p.read_text() or 0) if p.exists() else 0;"
            "p.write_text(str(n + 1)); time.sleep(0.6); raise SystemExit(0 if n == 4 else 3)"
        ),
        str(count),
    ]
    run = start(
        [
            *FLEET,
            "run",
            "--cloud",
            "none",
            "--max-restarts",
            "1",
            "--backoff",
            "0.01",
            "--healthy-after",
            "0.5",
            "--json",
            "--",
            *job,
        ],
        log,
        env(tmp_path),
    )
    assert finish(run) == 0, log.read_text()
    result = trailing_json(log)
    # four crashes, each after a healthy half second: never two in a row, so never given up
    assert (result["status"], result["starts"], result["restarts"]) == ("finished", 5, 4)
    assert log.read_text().count("restart count and backoff start again") == 4


def test_double_start_lands_in_the_same_place(tmp_path):
    home = tmp_path / "home"
    uri = f"file://{tmp_path / 'ckpt'}"
    wrapper = [*FLEET, "run", "--cloud", "none", "--name", "train", "--checkpoint-uri", uri, "--json", "--"]
    argv = [*wrapper, *job_argv(uri)]
    first_log = tmp_path / "first.log"
    first = start(argv, first_log, env(home))
    job_pid = wait_until(lambda: lock_holder(home).get("job_pid"), what="the first job")

    second_log = tmp_path / "second.log"
    assert finish(start(argv, second_log, env(home))) == 0
    second = trailing_json(second_log)
    assert second["status"] == "already-running" and second["holder"]["pid"] == first.pid
    assert f"job pid {job_pid}" in second["message"]

    os.kill(first.pid, signal.SIGKILL)  # the wrapper dies, its job keeps the lock
    first.wait()
    third_log = tmp_path / "third.log"
    third = start(argv, third_log, env(home))  # ... and the next start adopts the job
    wait_until(lambda: f"adopted job pid {job_pid} started at " in third_log.read_text(), what="the adoption")
    assert lock_holder(home)["pid"] == third.pid and lock_holder(home)["adopted_from"] == first.pid

    os.kill(job_pid, signal.SIGKILL)  # now nothing holds it: the next start resumes
    wait_until(lambda: not os.path.exists(f"/proc/{job_pid}") or _zombie(job_pid), what="the job to die")
    assert finish(third) == 0  # the adopter ends with the job it watched
    ended = trailing_json(third_log)
    assert ended["status"] == "exited" and "code unknown" in ended["message"]
    assert ended["adopted"]["job_pid"] == job_pid and ended["adopted"]["wrapper_pid"] == first.pid
    fourth_log = tmp_path / "fourth.log"
    final = CheckpointManager(uri).latest().step
    assert finish(start([*wrapper, *job_argv(uri, steps=final + 5)], fourth_log, env(home))) == 0
    fourth = trailing_json(fourth_log)
    assert fourth["status"] == "finished" and fourth["resume_steps"] == [final]
    assert f"finished at step {final + 5}" in fourth_log.read_text()


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def run_on_aws(tmp_path, imds):
    """``fleet run`` with the AWS watcher on the fake IMDS, once the job has trained 15 steps."""
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
            *job_argv(uri),
        ],
        log,
        env(tmp_path / "home"),
    )
    wait_until(lambda: last_step(log) >= 15, what="training")
    return run, log, uri


def test_notice_signals_the_job_and_the_run_ends_without_restart(tmp_path, imds):
    run, log, uri = run_on_aws(tmp_path, imds)
    deadline = imds.schedule_action("terminate", 60)
    assert finish(run) == 0, log.read_text()

    result = trailing_json(log)
    notice = result["notices"][0]
    assert (result["status"], result["starts"]) == ("interrupted", 1)
    assert (notice["kind"], notice["hook_ok"], notice["checkpoint_committed"]) == ("terminate", True, True)
    assert notice["checkpoint_step"] == last_step(log) == CheckpointManager(uri).latest().step
    assert CheckpointManager(uri).latest().committed_at < deadline


def test_rebalance_advice_checkpoints_restarts_and_then_the_notice_ends_it(tmp_path, imds):
    run, log, _ = run_on_aws(tmp_path, imds)
    imds.recommend_rebalance()
    resumed = wait_until(lambda: resumed_steps(log), what="the restart after the rebalance checkpoint")[0]
    wait_until(lambda: last_step(log) > resumed + 5, what="training after the restart")
    imds.schedule_action("terminate", 60)
    assert finish(run) == 0, log.read_text()

    result = trailing_json(log)
    kinds = [(n["kind"], n["checkpoint_committed"]) for n in result["notices"]]
    assert (result["status"], result["starts"], result["restarts"]) == ("interrupted", 2, 0)
    assert kinds == [("rebalance", True), ("terminate", True)]
    assert result["resume_steps"] == [0, resumed] and result["notices"][0]["checkpoint_step"] == resumed


def test_sigterm_to_the_wrapper_is_forwarded_and_nothing_restarts(tmp_path):
    home, log = tmp_path / "home", tmp_path / "run.log"
    uri = f"file://{tmp_path / 'ckpt'}"
    run = start(
        [*FLEET, "run", "--cloud", "none", "--checkpoint-uri", uri, "--json", "--", *job_argv(uri)], log, env(home)
    )
    wait_until(lambda: last_step(log) >= 5, what="training")
    run.send_signal(signal.SIGTERM)
    assert finish(run) == 0, log.read_text()
    result = trailing_json(log)
    assert (result["status"], result["starts"]) == ("stopped", 1)
    assert "stopped by SIGTERM" in log.read_text()
    assert CheckpointManager(uri).latest().step == last_step(log)


def test_a_restart_never_tells_the_job_step_0_while_its_storage_is_unreadable(tmp_path):
    """The checkpoint location turns unreadable after the first start (here: the directory is
    replaced by a file); the job is not started again with SPOTFLEET_RESUME_STEP=0."""
    log, ckpt = tmp_path / "run.log", tmp_path / "ckpt"
    ckpt.mkdir()
    job = [
        sys.executable,
        "-c",
        "import os, shutil, sys; print('start', os.environ['SPOTFLEET_RESUME_STEP'], flush=True); "
        f"shutil.rmtree({str(ckpt)!r}); open({str(ckpt)!r}, 'w').write('not a directory'); sys.exit(3)",
    ]
    run = start(
        [
            *FLEET,
            "run",
            "--cloud",
            "none",
            "--checkpoint-uri",
            f"file://{ckpt}",
            "--max-restarts",
            "2",
            "--backoff",
            "0.01",
            "--json",
            "--",
            *job,
        ],
        log,
        env(tmp_path),
    )
    assert finish(run) == 1, log.read_text()
    result = trailing_json(log)
    assert (result["starts"], result["resume_steps"]) == (1, [0])  # never started again with a wrong step
    assert result["status"] == "failed" and "cannot be read" in result["message"], result
    assert "Not a directory" in result["message"]  # the cause, in the one line
