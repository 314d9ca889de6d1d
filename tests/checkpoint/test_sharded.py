"""Checkpoints of several data objects (one per rank) committed by one manifest, without torch:
visibility, validity of every object, retention of every object of a kept step, hostile manifests."""

from __future__ import annotations

import json

import pytest

from fleet.checkpoint import CheckpointError, StaleStepError
from fleet.checkpoint.codec import decode, encode
from fleet.checkpoint.commit import new_token, upload_part
from fleet.checkpoint.layout import CheckpointInfo, commit_key


def upload_shards(mgr, step: int, world: int = 3):
    """What each rank of a distributed save does before the commit (here one after the other)."""
    token = new_token()
    return [upload_part(mgr.store, encode({"rank": r, "step": step}), step, f"{token}-r{r}") for r in range(world)]


def save_sharded(mgr, step: int, world: int = 3):
    return mgr.commit_parts(step, upload_shards(mgr, step, world))


def test_one_manifest_commits_every_shard_and_readers_check_all_of_them(location):
    mgr = location.manager(keep_last=2)
    save_sharded(mgr, 1)
    parts = upload_shards(mgr, 2)
    assert [i.step for i in mgr.list()] == [1]  # every shard written, none visible
    info = mgr.commit_parts(2, parts)
    assert [i.step for i in mgr.list()] == [1, 2]
    assert [decode(mgr.fetch_part(info, r))["rank"] for r in range(3)] == [0, 1, 2]
    assert CheckpointInfo.from_manifest(mgr.store.read(commit_key(2))).objects == info.objects

    mgr.store.delete(info.parts[1].key)  # rank 2's shard lost
    assert mgr.latest().step == 1  # the step no longer counts as intact
    with pytest.raises(CheckpointError, match="sharded checkpoint"):
        mgr.load(mgr.latest())


def test_keep_every_keeps_all_shards_of_an_old_step_and_prunes_the_rest(tmp_path):
    from fleet.checkpoint import CheckpointManager

    mgr = CheckpointManager(f"file://{tmp_path}", keep_last=1, keep_every=2)
    for step in (1, 2, 3):
        save_sharded(mgr, step)
    assert [i.step for i in mgr.list()] == [2, 3]
    data = mgr.store.list("data/")
    assert len([k for k in data if "step-000000000002" in k]) == 3
    assert not [k for k in data if "step-000000000001" in k]
    with pytest.raises(StaleStepError):
        mgr.check_fresh(1)


def test_an_identical_recommit_is_a_no_op_and_other_contents_are_refused(tmp_path):
    from fleet.checkpoint import CheckpointExistsError, CheckpointManager

    mgr = CheckpointManager(f"file://{tmp_path}")
    first = save_sharded(mgr, 5, world=2)
    assert save_sharded(mgr, 5, world=2).objects == first.objects  # same bytes: the existing step
    token = new_token()
    other = [upload_part(mgr.store, encode({"other": r}), 5, f"{token}-r{r}") for r in range(2)]
    with pytest.raises(CheckpointExistsError):
        mgr.commit_parts(5, other)
    assert len(mgr.store.list("data/")) == 2  # the losers' shards were removed


def test_a_retried_commit_of_the_same_parts_keeps_the_committed_data(tmp_path):
    """The first commit landed but its caller did not hear (a timeout): the retry with the same
    parts returns the committed step and leaves its data in place."""
    from fleet.checkpoint import CheckpointManager

    mgr = CheckpointManager(f"file://{tmp_path}")
    parts = upload_shards(mgr, 7, world=2)
    first = mgr.commit_parts(7, parts)
    again = mgr.commit_parts(7, parts)
    assert again.objects == first.objects
    assert [decode(mgr.fetch_part(mgr.latest(), r))["rank"] for r in range(2)] == [0, 1]


@pytest.mark.parametrize("key", ["../../etc/passwd", "data/step-000000000009-x.ckpt", "commits/step-000000000003.json"])
def test_a_part_outside_the_layout_or_of_another_step_is_refused(key):
    doc = {
        "format": "spotfleet-checkpoint/1",
        "step": 3,
        "name": "step-000000000003",
        "size": 1,
        "sha256": "0",
        "committed_at": 0.0,
        "data_key": "data/step-000000000003-a.ckpt",
        "writer": "w",
        "metrics": {},
        "parts": [{"key": key, "size": 1, "sha256": "0"}],
    }
    with pytest.raises(ValueError):
        CheckpointInfo.from_manifest(json.dumps(doc).encode())
