"""``save_async`` snapshots by fork (copy-on-write): values at the call, a killed writer, retention,
fallback to the copy snapshot, no zombies, and a parent that dies mid-save. Real torch on the
CPU, real files, real child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from fleet.checkpoint import CheckpointError, CheckpointExistsError, CheckpointManager, codec
from fleet.checkpoint.forked import supported
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.tensors import host_copy
from fleet.checkpoint.torch import load, save

pytestmark = pytest.mark.skipif(not supported(), reason="fork snapshots need Linux")
ROOT = Path(__file__).resolve().parents[2]


def model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 64))


def reaped(pid: int) -> bool:
    """Whether ``pid`` is neither running nor a zombie child of this process."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True  # not our child any more: reaped
    return False


def test_values_at_the_call_are_stored_bit_exact_whatever_training_does_next(location):
    mgr = location.manager()
    net = model(0)
    at_call = {k: v.clone() for k, v in net.state_dict().items()}
    future = save(mgr, {"model": net, "step": 1}, 1, background=True)
    assert mgr.last_snapshot is not None and mgr.last_snapshot.mode == "fork" and mgr.last_snapshot.pid > 0
    with torch.no_grad():  # training goes on at once, in place
        for p in net.parameters():
            p.mul_(-3.0).add_(1.0)
    assert future.result().step == 1
    target = model(1)
    state, _ = load(mgr, {"model": target, "step": 0})
    for key, value in target.state_dict().items():
        assert torch.equal(value, at_call[key]), key  # bit for bit, not the mutated values
    assert state["step"] == 1
    assert reaped(mgr.last_snapshot.pid)


def test_fork_writes_the_bytes_and_digest_a_synchronous_save_writes(tmp_path):
    state = {"w": np.arange(300_000, dtype=np.float32), "b": b"\x00\x01" * 33, "t": (1, "x"), "e": np.zeros(0)}
    forked = CheckpointManager(f"file://{tmp_path}/fork").save_async(state, 3).result()
    plain = CheckpointManager(f"file://{tmp_path}/plain").save(state, 3)
    assert (forked.size, forked.digest, forked.algorithm) == (plain.size, plain.digest, plain.algorithm)
    assert (tmp_path / "fork" / forked.data_key).read_bytes() == (tmp_path / "plain" / plain.data_key).read_bytes()
    assert not list((tmp_path / "fork" / "data").glob("*.partial"))


def process_state(pid: int) -> str:
    """The one-letter state of ``pid`` (R, S, D, T, Z, ...); "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return ""


def start_and_kill(mgr: CheckpointManager, state: dict, step: int):
    """A save_async whose child is SIGKILLed while it writes: stopped first, killed once it is
    seen stopped (retried in the unlikely case the child finished before the stop landed)."""
    for attempt in range(5):
        future = mgr.save_async(state, step + attempt)
        pid = mgr.last_snapshot.pid
        os.kill(pid, signal.SIGSTOP)
        while (seen := process_state(pid)) not in ("T", "t", "Z", "X", ""):
            time.sleep(0.001)
        os.kill(pid, signal.SIGKILL)
        if seen in ("T", "t"):
            return future
        future.exception()
        mgr.wait()
    pytest.fail("the snapshot writer always finished before it could be stopped")


def test_a_killed_writer_commits_nothing_and_the_next_save_works(tmp_path, caplog):
    mgr = CheckpointManager(f"file://{tmp_path}", keep_last=2)
    mgr.save({"w": np.ones(10)}, 1)
    big = {"w": np.ones(64 * 1024 * 1024 // 8)}
    future = start_and_kill(mgr, big, 2)
    err = future.exception()
    assert isinstance(err, CheckpointError) and "killed by SIGKILL" in str(err) and "not committed" in str(err)
    assert not mgr.healthy and "FAILED" in caplog.text
    assert [i.step for i in mgr.list()] == [1]
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [mgr.latest().data_key.split("/")[-1]]
    with pytest.raises(CheckpointError, match="killed by SIGKILL"):
        mgr.save_async({"w": np.ones(10)}, 5)  # the failure is raised once, nothing saved
    assert mgr.save_async({"w": np.full(10, 7.0)}, 5).result().step == 5
    assert mgr.healthy
    state, info = mgr.load_latest()
    assert info.step == 5 and np.all(state["w"] == 7.0)
    assert reaped(mgr.last_snapshot.pid)


def test_keep_last_and_fallback_to_the_newest_intact_are_unchanged(tmp_path, caplog):
    mgr = CheckpointManager(f"file://{tmp_path}", keep_last=2)
    for step in range(1, 6):
        mgr.save_async({"w": np.full(1000, float(step))}, step)
    mgr.wait()
    assert [i.step for i in mgr.list()] == [4, 5]
    assert len(list((tmp_path / "data").iterdir())) == 2
    newest = mgr.latest()
    path = tmp_path / newest.data_key
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    state, info = mgr.load_latest()
    assert info.step == 4 and np.all(state["w"] == 4.0) and "step 5" in caplog.text


def test_same_step_same_content_is_a_no_op_and_other_content_loses(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    first = mgr.save({"w": np.arange(50.0)}, 4)
    assert mgr.save_async({"w": np.arange(50.0)}, 4).result() == first
    other = mgr.save_async({"w": np.arange(51.0)}, 4)
    with pytest.raises(CheckpointExistsError):
        mgr.wait()
    assert isinstance(other.exception(), CheckpointExistsError)
    assert [p.name for p in (tmp_path / "data").iterdir()] == [first.data_key.split("/")[-1]]


def test_the_knob_and_off_host_arrays_take_the_copy_snapshot(tmp_path):
    with pytest.raises(CheckpointError, match="snapshot must be one of fork, copy"):
        CheckpointManager(f"file://{tmp_path}/x", snapshot="cow")
    mgr = CheckpointManager(f"file://{tmp_path}/copy", snapshot="copy")
    weights = np.arange(1000.0)
    future = mgr.save_async({"w": weights}, 1)
    weights[:] = 0
    assert future.result().step == 1 and np.array_equal(mgr.load_latest()[0]["w"], np.arange(1000.0))
    assert (mgr.last_snapshot.mode, mgr.last_snapshot.pid) == ("copy", None)
    assert mgr.last_snapshot.reason == 'snapshot="copy"'

    # an array off the host (a GPU tensor) enters as a HostCopy; built here from a CPU tensor,
    # the same code path a CUDA tensor takes (this machine has no GPU)
    tensor = torch.arange(12, dtype=torch.bfloat16).reshape(3, 4)
    fork_mgr = CheckpointManager(f"file://{tmp_path}/device")
    fork_mgr.save_async({"t": host_copy(tensor.view(torch.int16))}, 1).result()
    assert fork_mgr.last_snapshot.mode == "copy" and "GPU" in fork_mgr.last_snapshot.reason
    stored = fork_mgr.load_latest()[0]["t"]
    assert torch.equal(torch.from_numpy(stored).view(torch.bfloat16), tensor)


def test_a_host_copy_is_copied_once_straight_into_the_snapshot_buffer():
    tensor = torch.randn(5, 7).t()  # not contiguous: the device copy lays it out
    plain = codec.encode_views({"t": tensor.contiguous().numpy()}).tobytes()
    assert codec.encode({"t": host_copy(tensor)}).tobytes() == plain
    assert codec.encode_views({"t": host_copy(tensor)}).tobytes() == plain  # a synchronous save

    filled: list[np.ndarray] = []
    buffer = np.zeros(4096, np.uint8)

    def fill(out: np.ndarray) -> None:  # what a device copy does: write into the given memory
        filled.append(out)
        out[:] = np.frombuffer(tensor.contiguous().numpy().tobytes(), np.uint8)

    def no_host_copy() -> np.ndarray:
        raise AssertionError("a snapshot must not take a host copy first")

    device = codec.HostCopy(np.dtype(np.float32), (7, 5), fill, no_host_copy)
    snap = codec.encode({"t": device}, lambda n: buffer)
    assert snap.tobytes() == plain and len(filled) == 1 and np.shares_memory(filled[0], buffer)


def test_many_saves_in_a_row_leave_no_zombie(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}", keep_last=1, max_pending=2)
    pids = []
    for step in range(1, 21):
        mgr.save_async({"w": np.full(100, step)}, step)
        pids.append(mgr.last_snapshot.pid)
    mgr.close()
    assert len(set(pids)) == 20 and all(reaped(pid) for pid in pids)
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
    assert not set(map(int, children)) & set(pids)


PARENT_DIES = textwrap.dedent(
    """
    import os, sys, numpy as np
    from fleet.checkpoint import CheckpointManager
    mgr = CheckpointManager(sys.argv[1], keep_last=1)
    mgr.save({"w": np.zeros(10)}, 1)
    mgr.save_async({"w": np.ones(32 * 1024 * 1024 // 8)}, 2)
    print(mgr.last_snapshot.pid, flush=True)
    os.kill(os.getpid(), 9)
    """
)


def test_a_parent_killed_mid_save_leaves_nothing_a_later_load_trusts(tmp_path):
    uri = f"file://{tmp_path}"
    run = subprocess.run(
        [sys.executable, "-c", PARENT_DIES, uri],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert run.returncode == -signal.SIGKILL, run.stderr
    child = int(run.stdout.split()[0])
    deadline = time.monotonic() + 120  # the orphaned writer finishes its file and exits
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    mgr = CheckpointManager(uri, keep_last=1)
    state, info = mgr.load_latest()
    assert info.step == 1 and np.all(state["w"] == 0)
    assert [i.step for i in mgr.list()] == [1]
    mgr.save_async({"w": np.full(10, 3.0)}, 3).result()
    assert [p.name for p in (tmp_path / "data").iterdir()] == [mgr.latest().data_key.split("/")[-1]]


def test_an_unwritable_location_fails_in_the_background_without_a_child(tmp_path):
    (tmp_path / "data").write_text("not a folder")
    mgr = CheckpointManager(f"file://{tmp_path}")
    future = mgr.save_async({"w": np.ones(3)}, 1)
    assert "cannot write" in str(future.exception()) and not mgr.healthy
    assert mgr.last_snapshot is None  # nothing was forked
    with pytest.raises(CheckpointError, match="cannot write"):
        mgr.wait()


def test_staged_payload_of_a_remote_store_is_uploaded_as_written(location_factory):
    loc = location_factory("s3")
    mgr = loc.manager()
    weights = np.arange(3 * 1024 * 1024, dtype=np.float32)
    future = mgr.save_async({"w": weights}, 2)
    weights[:] = -1
    info = future.result()
    assert mgr.last_snapshot.mode == "fork"
    expected = codec.encode_views({"w": np.arange(3 * 1024 * 1024, dtype=np.float32)})
    assert info.digest == Payload.of(expected.chunks).digest()
    assert reaped(mgr.last_snapshot.pid)


def test_a_write_error_in_the_child_is_reported_with_its_cause(tmp_path):
    import resource

    mgr = CheckpointManager(f"file://{tmp_path}")
    mgr.save({"w": np.zeros(10)}, 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024 * 1024, hard))  # the child inherits it: EFBIG
    try:
        future = mgr.save_async({"w": np.ones(4 * 1024 * 1024 // 8)}, 2)
        err = future.exception()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert mgr.last_snapshot.mode == "fork"
    assert isinstance(err, CheckpointError) and "file size limit exceeded" in str(err)
    assert [i.step for i in mgr.list()] == [1] and not list((tmp_path / "data").glob("*.partial"))
    with pytest.raises(CheckpointError, match="file size limit exceeded"):
        mgr.wait()
