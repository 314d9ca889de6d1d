"""A rerun of ``fleet run`` adopts a job whose wrapper was killed: it watches the job, delivers
notices to it (final checkpoint included), and exactly one of two concurrent reruns adopts.
A record whose job pid is dead or names another process never leads to signalling that process."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from agent_support import FLEET, env, finish, job_argv, last_step, start, trailing_json, wait_until

from fleet.agent.procid import identity
from fleet.checkpoint import CheckpointManager


def record(home) -> dict:
    try:
        return json.loads((home / "run" / "train.lock").read_text() or "{}")
    except (OSError, ValueError):
        return {}


def wrapper_argv(uri: str, *cloud: str, save_every: int = 10) -> list[str]:
    return [
        *FLEET,
        "run",
        *(cloud or ("--cloud", "none")),
        "--name",
        "train",
        "--checkpoint-uri",
        uri,
        "--json",
        "--",
        *job_argv(uri, save_every=save_every),
    ]


def orphan_a_job(tmp_path, argv):
    """Start ``fleet run``, let the job train, kill -9 the wrapper: (home, job pid, job log)."""
    home, log = tmp_path / "home", tmp_path / "first.log"
    first = start(argv, log, env(home))
    job = wait_until(lambda: record(home).get("job_pid"), what="the job")
    wait_until(lambda: last_step(log) >= 15, what="training")
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert identity(job) is not None  # the job runs on, unwatched
    return home, job, log


def adopted_line(log, job: int) -> bool:
    return f"adopted job pid {job} started at " in log.read_text()


def test_a_rerun_adopts_the_job_and_delivers_the_final_notice(tmp_path, imds):
    uri = f"file://{tmp_path / 'ckpt'}"
    # Only the final save: an adopter cannot see the exit status of a job it did not start, so it
    # needs a checkpoint newer than the notice. With periodic saves, a notice that lands just after
    # one committed leaves nothing newer to save, and the outcome is (rightly) "not confirmed".
    cloud = ("--cloud", "aws", "--metadata-url", imds.url, "--poll-interval", "0.1")
    argv = wrapper_argv(uri, *cloud, save_every=100_000)
    home, job, job_log = orphan_a_job(tmp_path, argv)
    first_wrapper = record(home)["pid"]

    log = tmp_path / "rerun.log"
    rerun = start(argv, log, env(home))
    wait_until(lambda: adopted_line(log, job), what="the adoption")
    assert f"(its wrapper pid {first_wrapper} is gone)" in log.read_text()
    assert (record(home)["pid"], record(home)["job_pid"]) == (rerun.pid, job)

    deadline = imds.schedule_action("terminate", 60)
    assert finish(rerun) == 0, log.read_text()
    result = trailing_json(log)
    notice = result["notices"][0]
    assert result["status"] == "interrupted" and result["starts"] == 0  # no second job was started
    assert result["adopted"]["job_pid"] == job and result["adopted"]["wrapper_pid"] == first_wrapper
    assert (notice["kind"], notice["hook_ok"], notice["checkpoint_committed"]) == ("terminate", True, True)
    assert notice["hook_detail"] == f"SIGTERM sent to pid {job}"
    latest = CheckpointManager(uri).latest()
    assert notice["checkpoint_step"] == latest.step == last_step(job_log)
    assert latest.committed_at < deadline and identity(job) is None


def test_of_two_concurrent_reruns_exactly_one_adopts(tmp_path):
    uri = f"file://{tmp_path / 'ckpt'}"
    argv = wrapper_argv(uri)
    home, job, _ = orphan_a_job(tmp_path, argv)

    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    reruns = [start(argv, log, env(home)) for log in logs]
    done = wait_until(lambda: [i for i, p in enumerate(reruns) if p.poll() is not None], what="one rerun to end")
    assert len(done) == 1, [log.read_text() for log in logs]
    quitter, adopter = done[0], 1 - done[0]
    assert reruns[quitter].returncode == 0
    said = trailing_json(logs[quitter])
    assert said["status"] == "already-running" and f"job pid {job}" in said["message"]
    wait_until(lambda: adopted_line(logs[adopter], job), what="the adoption")
    assert record(home)["pid"] == reruns[adopter].pid and not adopted_line(logs[quitter], job)

    later = tmp_path / "later.log"  # once adopted, a rerun names the live adopter
    assert finish(start(argv, later, env(home))) == 0
    assert trailing_json(later)["holder"]["pid"] == reruns[adopter].pid

    reruns[adopter].send_signal(signal.SIGTERM)  # forwarded to the adopted job, which saves and exits
    assert finish(reruns[adopter]) == 0
    result = trailing_json(logs[adopter])
    assert result["status"] == "stopped" and f"adopted job pid {job} exited, code unknown" in result["message"]
    assert identity(job) is None


def _holds_the_lock(home, tmp_path):
    """A process that holds the run lock the way a job's leftover child would (it inherited it)."""
    code = (
        "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
        "fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(600)"
    )
    (home / "run").mkdir(parents=True, exist_ok=True)
    log = tmp_path / "holder.log"
    proc = start([sys.executable, "-c", code, str(home / "run" / "train.lock")], log, env(home))
    wait_until(lambda: "locked" in log.read_text(), what="the lock holder")
    return proc


def _stale_record(home, *, job_pid: int, dead_pid: int) -> None:
    me = identity(os.getpid())
    assert me is not None
    (home / "run" / "train.lock").write_text(
        json.dumps(
            {
                "pid": dead_pid,
                "start": 1,
                "boot": me.boot,
                "job_pid": job_pid,
                "job_start": 1,
                "job_boot": me.boot,
                "argv": ["whatever"],
                "started_at": time.time(),
            }
        )
    )


def test_a_recycled_job_pid_under_a_held_lock_is_never_adopted_or_signalled(tmp_path):
    uri = f"file://{tmp_path / 'ckpt'}"
    home = tmp_path / "home"
    holder = _holds_the_lock(home, tmp_path)
    bystander = start([sys.executable, "-c", "import time; time.sleep(600)"], tmp_path / "by.log", env(home))
    _stale_record(home, job_pid=bystander.pid, dead_pid=holder.pid + 100_000)  # the job pid now names another process
    data = json.loads((home / "run" / "train.lock").read_text())
    data["argv"] = wrapper_argv(uri)[wrapper_argv(uri).index("--") + 1 :]
    (home / "run" / "train.lock").write_text(json.dumps(data))

    log = tmp_path / "rerun.log"
    assert finish(start(wrapper_argv(uri), log, env(home))) == 1
    result = trailing_json(log)
    assert result["status"] == "stale" and result["adopted"] == {} and result["starts"] == 0
    assert f"its job (pid {bystander.pid})" in result["message"] and "fuser -v" in result["message"]
    assert bystander.poll() is None and holder.poll() is None  # nothing was signalled


def test_a_stale_record_with_a_free_lock_starts_a_fresh_job(tmp_path):
    uri = f"file://{tmp_path / 'ckpt'}"
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    bystander = start([sys.executable, "-c", "import time; time.sleep(600)"], tmp_path / "by.log", env(home))
    _stale_record(home, job_pid=bystander.pid, dead_pid=bystander.pid + 100_000)

    log = tmp_path / "run.log"
    short = [
        *FLEET,
        "run",
        "--cloud",
        "none",
        "--name",
        "train",
        "--checkpoint-uri",
        uri,
        "--json",
        "--",
        *job_argv(uri, steps=12),
    ]
    assert finish(start(short, log, env(home))) == 0, log.read_text()
    result = trailing_json(log)
    assert (result["status"], result["starts"], result["adopted"]) == ("finished", 1, {})
    assert "finished at step 12" in log.read_text() and bystander.poll() is None


def test_another_command_under_the_same_name_does_not_adopt_the_job(tmp_path):
    uri = f"file://{tmp_path / 'ckpt'}"
    home, job, _ = orphan_a_job(tmp_path, wrapper_argv(uri))
    other = [
        *FLEET,
        "run",
        "--cloud",
        "none",
        "--name",
        "train",
        "--checkpoint-uri",
        uri,
        "--json",
        "--",
        *job_argv(uri, steps=7),
    ]
    log = tmp_path / "other.log"
    assert finish(start(other, log, env(home))) == 1
    result = trailing_json(log)
    assert result["status"] == "unwatched" and f"job pid {job} is running UNWATCHED" in result["message"]
    assert "not adopted" in result["message"] and identity(job) is not None  # left alone, not signalled
