"""Failed saves are loud and early: reported when they happen (log, ``healthy``, the next
``save_async``), with the real cause, and never in the way of the final save."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from fleet.checkpoint import CheckpointError, CheckpointManager
from fleet.checkpoint.stores.local import write_all

ROOT = Path(__file__).resolve().parents[2]


def test_a_failed_background_save_is_reported_at_once_with_its_cause(location_factory, caplog):
    loc = location_factory("s3")
    bad = loc.uri.replace("s3://ckpt-tests", "s3://no-such-bucket")
    mgr = CheckpointManager(bad, env=loc.env)
    assert mgr.healthy and mgr.error is None
    with caplog.at_level(logging.DEBUG, logger="fleet.checkpoint"):
        future = mgr.save_async({"x": np.arange(10)}, 10)
        future.exception()  # the upload has finished (failed)
    assert not mgr.healthy and "does not exist" in str(mgr.error)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings and "background save of step 10 FAILED" in warnings[0]
    assert "bucket 'no-such-bucket' does not exist" in warnings[0]  # the cause, not a cleanup note
    with pytest.raises(CheckpointError, match="does not exist"):  # the loop learns at the next save
        mgr.save_async({"x": np.arange(10)}, 20)
    mgr.wait()  # raised once, not again


def test_health_comes_back_after_a_successful_save(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the checkpoint folder should be")
    mgr = CheckpointManager(f"file://{blocker}/ckpt")
    mgr.save_async({"x": 1}, 1).exception()
    assert not mgr.healthy
    with pytest.raises(CheckpointError, match="cannot (write|list).*Not a directory"):
        mgr.wait()
    blocker.unlink()
    mgr.save_async({"x": 2}, 2).result()
    assert mgr.healthy and mgr.error is None


def test_a_failed_background_save_never_stops_the_final_save(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    mgr = CheckpointManager(f"file://{blocker}/ckpt")
    mgr.save_async({"x": 1}, 40).exception()  # failed in the background
    blocker.unlink()
    info = mgr.save({"x": 2}, 41)  # the final save waits for it, then lands
    mgr.close()  # the superseded failure is not raised again
    assert CheckpointManager(f"file://{blocker}/ckpt").latest() == info


def test_a_full_device_says_no_space_left():
    fd = os.open("/dev/full", os.O_WRONLY)
    try:
        with pytest.raises(OSError) as err:
            write_all(fd, memoryview(b"x" * 10_000))
        assert err.value.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_a_short_write_is_continued_not_ignored(tmp_path):
    read_fd, write_fd = os.pipe()  # a pipe takes at most its buffer per write
    data = os.urandom(200_000)
    got = bytearray()

    def drain() -> None:
        while chunk := os.read(read_fd, 65536):
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    write_all(write_fd, memoryview(data))
    os.close(write_fd)
    reader.join(timeout=30)
    os.close(read_fd)
    assert bytes(got) == data


FULL_DISK_JOB = textwrap.dedent("""
    import json, logging, sys
    import numpy as np
    from fleet.checkpoint import CheckpointError, CheckpointManager
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    mgr = CheckpointManager(sys.argv[1], keep_last=3)
    events = []
    for step in range(10, 101, 10):
        state = {"w": np.full(600_000 // 8, float(step))}        # ~600 kB per checkpoint
        try:
            mgr.save_async(state, step).exception()
        except CheckpointError as err:
            events.append({"step": step, "raised": str(err)})
        events.append({"step": step, "healthy": mgr.healthy})
    final = mgr.save({"w": np.zeros(10)}, 101)                   # small: it fits where others did not
    mgr.close()
    print(json.dumps({"events": events, "final": final.step}))
""")


def test_disk_full_is_reported_at_the_first_failed_save_and_the_final_save_still_lands(tmp_path):
    """A real 2 MB filesystem (tmpfs in a private mount namespace): room for 3 checkpoints."""
    if not shutil.which("unshare"):
        pytest.skip("needs unshare(1) for a private tmpfs")
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=2m tmpfs {tmp_path}"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a private tmpfs here: {probe.stderr.strip()}")
    script = tmp_path / "job.py"
    script.write_text(FULL_DISK_JOB)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    shell = f"mount -t tmpfs -o size=2m tmpfs {mnt} && exec {sys.executable} {script} file://{mnt}/ckpt"
    run = subprocess.run(
        ["unshare", "-rm", "sh", "-c", shell],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.splitlines()[-1])
    unhealthy = [e["step"] for e in out["events"] if e.get("healthy") is False]
    raised = [e for e in out["events"] if "raised" in e]
    assert unhealthy and unhealthy[0] == 40  # 3 kept + the 4th being written > 2 MB
    assert raised and raised[0]["step"] == 50 and "no space left on device" in raised[0]["raised"]
    assert "background save of step 40 FAILED" in run.stderr and "no space left on device" in run.stderr
    assert "holds" not in run.stderr  # not reported as a size mismatch
    assert out["final"] == 101


def test_a_local_location_that_cannot_be_listed_is_an_error_not_an_empty_one(tmp_path):
    from fleet.checkpoint import CheckpointManager
    from fleet.checkpoint.errors import CheckpointError

    blocked = tmp_path / "ckpt"
    blocked.write_text("a file where the checkpoint directory should be")
    with pytest.raises(CheckpointError, match="Not a directory"):
        CheckpointManager(f"file://{blocked}").latest()
    assert CheckpointManager(f"file://{tmp_path / 'not-yet'}").latest() is None  # not written yet: empty
