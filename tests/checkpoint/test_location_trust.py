"""What a checkpoint location holds besides the manager's own objects is not the manager's: a
link never carries a save or a prune out of the location, a file the layout did not write is
never pruned, and a planted newer step that is not a checkpoint blocks no save (a resume skips
it, so a save may pass it)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from fleet.checkpoint import CheckpointManager
from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.layout import CheckpointInfo, commit_key, data_key
from fleet.checkpoint.payload import Payload


def test_a_symlinked_data_folder_is_refused_and_nothing_outside_is_written_or_deleted(tmp_path):
    location, outside = tmp_path / "ckpt", tmp_path / "elsewhere"
    mgr = CheckpointManager(f"file://{location}", keep_last=1)
    mgr.save({"w": np.arange(3)}, 1)
    outside.mkdir()
    theirs = outside / "step-000000000000-keepme.ckpt"
    theirs.write_bytes(b"someone else's file")
    for f in (location / "data").iterdir():
        f.rename(outside / f.name)
    (location / "data").rmdir()
    (location / "data").symlink_to(outside)
    before = sorted(p.name for p in outside.iterdir())
    with pytest.raises(CheckpointError, match=r"data/ is a symbolic link .*never follows links"):
        mgr.save({"w": np.arange(3)}, 2)
    assert sorted(p.name for p in outside.iterdir()) == before and theirs.read_bytes() == b"someone else's file"
    mgr.close()


def test_pruning_never_deletes_a_file_the_layout_did_not_write(tmp_path):
    location = tmp_path / "ckpt"
    mgr = CheckpointManager(f"file://{location}", keep_last=2)
    mgr.save({"w": np.arange(3)}, 1)
    planted = [
        location / "data" / "step-000000000001-notes.txt",
        location / "data" / "step-000000000000-x.ckpt.bak",
        location / "commits" / "step-000000000001.json.orig",
    ]
    for p in planted:
        p.write_bytes(b"not the manager's")
    for step in range(2, 6):
        mgr.save({"w": np.arange(3) + step}, step)
    assert [i.step for i in mgr.list()] == [4, 5]
    assert all(p.read_bytes() == b"not the manager's" for p in planted)
    leftover = location / "data" / "step-000000000002-0123456789abcdef.ckpt.partial"  # a crashed writer's
    leftover.write_bytes(b"half")
    mgr.save({"w": np.arange(3)}, 6)
    assert not leftover.exists()
    mgr.close()


def test_a_planted_newer_step_that_is_not_a_checkpoint_blocks_no_save(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    mgr.save({"w": np.arange(4)}, 10)
    junk = b"this is not a checkpoint, just bytes of the right size" * 10
    key = data_key(100, "planted")
    mgr.store.upload(key, Payload.of([junk]))
    manifest = CheckpointInfo(
        step=100,
        name="step-000000000100",
        size=len(junk),
        digest=hashlib.sha256(junk).hexdigest(),
        committed_at=0.0,
        data_key=key,
        algorithm="sha256",
    )
    assert mgr.store.create(commit_key(100), manifest.to_manifest())
    assert mgr.load_latest()[1].step == 10  # a resume skips it...
    saved = mgr.save({"w": np.arange(4) * 2}, 11)  # ...so a save passes it
    state, info = mgr.load_latest()
    assert info == saved and list(state["w"]) == [0, 2, 4, 6]
    mgr.close()
