"""The documented patterns work as written: the final save after a periodic save of the same step,
a fresh run pointed at a used location, numpy step numbers, plain paths."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fleet.checkpoint import CheckpointError, CheckpointExistsError, CheckpointManager, open_store
from fleet.checkpoint.errors import StaleStepError


def state_for(step: int) -> dict:
    return {"w": np.arange(1000, dtype=np.float64) * step, "step": step}


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_final_save_of_an_already_saved_step_is_a_no_op(location_factory, kind):
    loc = location_factory(kind)
    mgr = loc.manager()
    periodic = mgr.save_async(state_for(100), 100)
    mgr.wait()  # the checkpoint guide's final-save pattern
    final = mgr.save(state_for(100), 100)
    assert final == periodic.result()
    assert loc.store().list("data/") == [final.data_key]  # no second upload left behind
    mgr.close()


def test_the_final_save_alone_waits_for_the_periodic_one(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    periodic = mgr.save_async(state_for(100), 100)
    final = mgr.save(state_for(100), 100)  # no wait() needed first
    assert final == periodic.result() and mgr.latest() == final


def test_same_step_with_other_content_names_the_writer(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    first = mgr.save(state_for(5), 5)
    with pytest.raises(
        CheckpointExistsError, match=f"step 5 is already committed by {first.writer} with other content"
    ):
        mgr.save(state_for(6), 5)


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_a_fresh_run_in_a_used_location_is_refused_not_pruned(location_factory, kind):
    loc = location_factory(kind)
    old = loc.manager(keep_last=2)
    for step in (300, 400):
        old.save(state_for(step), step)
    fresh = loc.manager(keep_last=2)
    with pytest.raises(StaleStepError, match="refusing to save step 10: this location already holds step 400"):
        fresh.save(state_for(10), 10)
    with pytest.raises(StaleStepError):
        fresh.save_async(state_for(20), 20).result()
    assert [i.step for i in fresh.list()] == [300, 400]
    assert len(loc.store().list("data/")) == 2  # nothing was written


def test_a_broken_newer_commit_does_not_block_saving(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    mgr.save(state_for(30), 30)
    broken = mgr.save(state_for(40), 40)
    mgr.store.delete(broken.data_key)  # step 40 lost its data
    assert mgr.save(state_for(35), 35).step == 35  # resuming from 30 must be able to save
    assert mgr.load_latest()[1].step == 35


@pytest.mark.parametrize("step", [np.int64(7), np.int32(7), np.uint16(7)])
def test_numpy_integer_steps_are_accepted(tmp_path, step):
    mgr = CheckpointManager(f"file://{tmp_path}")
    info = mgr.save(state_for(7), step)
    assert info.step == 7 and type(info.step) is int
    assert mgr.save_async(state_for(8), step + 1).result().step == 8


@pytest.mark.parametrize("step", [True, np.bool_(True), 7.0, np.float64(7), "7", -1, np.int64(-1)])
def test_non_integral_steps_are_refused(tmp_path, step):
    with pytest.raises(CheckpointError, match="step must be a whole number >= 0"):
        CheckpointManager(f"file://{tmp_path}").save({}, step)


def test_plain_paths_are_local_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    absolute = open_store(str(tmp_path / "abs"))
    relative = open_store("runs/one")
    assert absolute.uri == f"file://{tmp_path / 'abs'}"
    assert relative.uri == f"file://{tmp_path / 'runs' / 'one'}"  # resolved once, at open
    mgr = CheckpointManager("runs/one")
    mgr.save({"x": 1}, 1)
    os.chdir("/")
    assert mgr.latest().step == 1
