"""CheckpointManager on every store: commit, keep-last-N, fallback past corrupt checkpoints,
asynchronous saves, and two writers racing for one step."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from fleet.checkpoint import CheckpointError, CheckpointExistsError, CheckpointManager
from fleet.checkpoint.layout import commit_key
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.stores.base import MiB


def state_for(step: int, n: int = 1000) -> dict:
    return {"w": np.arange(n, dtype=np.float64) * step, "step": step, "meta": {"note": f"s{step}"}}


def assert_state(state: dict, step: int, n: int = 1000) -> None:
    assert state["step"] == step and state["meta"] == {"note": f"s{step}"}
    np.testing.assert_array_equal(state["w"], np.arange(n, dtype=np.float64) * step)


def test_save_commits_and_loads_back(location):
    mgr = location.manager()
    assert mgr.latest() is None and mgr.load_latest() is None and mgr.list() == []
    info = mgr.save(state_for(7), 7)
    assert (info.step, info.name, info.algorithm, len(info.digest)) == (7, "step-000000000007", "xxh3-128", 32)
    assert info.size == location.store().size(info.data_key)
    state, loaded = mgr.load_latest()
    assert loaded == info
    assert_state(state, 7)


def test_keep_last_n(location):
    mgr = location.manager(keep_last=3)
    for step in range(1, 7):
        mgr.save(state_for(step), step)
    assert [i.step for i in mgr.list()] == [4, 5, 6]
    store = location.store()
    assert len(store.list("data/")) == 3 and len(store.list("commits/")) == 3
    assert mgr.latest().step == 6


def test_pruning_never_removes_the_newest_valid_checkpoints(location):
    mgr = location.manager(keep_last=2)
    for step in (1, 2, 3):
        mgr.save(state_for(step), step)
    newest = mgr.latest()
    location.store().delete(newest.data_key)  # step 3 lost its data
    mgr.save(state_for(4), 4)
    # valid: 4 and 2 (3 is broken and does not count); nothing at or above 2 is deleted
    assert [i.step for i in mgr.list()] == [2, 3, 4]
    location.store().delete(mgr.latest().data_key)  # now 4 is broken too
    assert mgr.load_latest()[1].step == 2


def corrupt_bitflip(store, info):
    data = bytearray(store.download(info.data_key, info.size))
    data[len(data) // 2] ^= 0x01
    store.upload(info.data_key, Payload.of([bytes(data)]))


def corrupt_truncate(store, info):
    store.upload(info.data_key, Payload.of([bytes(store.download(info.data_key, info.size))[:-10]]))


def corrupt_delete(store, info):
    store.delete(info.data_key)


def corrupt_manifest(store, info):
    store.delete(commit_key(info.step))
    store.create(commit_key(info.step), b"{not json")


@pytest.mark.parametrize("corrupt", [corrupt_bitflip, corrupt_truncate, corrupt_delete, corrupt_manifest])
def test_corrupt_newest_falls_back_to_previous(location, corrupt, caplog):
    mgr = location.manager(keep_last=3)
    for step in (10, 20, 30):
        mgr.save(state_for(step), step)
    corrupt(location.store(), mgr.latest())
    state, info = mgr.load_latest()
    assert info.step == 20
    assert_state(state, 20)
    assert mgr.latest(verify=True).step == 20
    assert "step 30" in caplog.text


def test_checksum_is_what_catches_same_size_corruption(location):
    mgr = location.manager()
    mgr.save(state_for(1), 1)
    mgr.save(state_for(2), 2)
    corrupt_bitflip(location.store(), mgr.latest())
    assert mgr.latest().step == 2  # the cheap check (size) cannot see a bit flip
    assert mgr.load_latest()[1].step == 1  # the checksum on load does


def test_save_async_snapshots_and_training_continues(location):
    mgr = location.manager()
    weights = np.zeros(2 * MiB // 8)
    futures = []
    for step in (1, 2, 3):
        weights += 1  # training mutates in place right after the call
        futures.append(mgr.save_async({"w": weights, "step": step}, step))
    mgr.wait()
    assert [f.result().step for f in futures] == [1, 2, 3]
    loaded = {i.step: mgr.load(i) for i in mgr.list()}
    for step, state in loaded.items():
        assert state["step"] == step and np.all(state["w"] == step)


def test_wait_raises_a_failed_background_save(location_factory):
    loc = location_factory("file")
    mgr = loc.manager()
    mgr.save(state_for(5), 5)
    future = mgr.save_async(state_for(6), 5)  # same step, other content: the commit must lose
    with pytest.raises(CheckpointExistsError, match="step 5 is already committed"):
        mgr.wait()
    assert isinstance(future.exception(), CheckpointExistsError)
    mgr.wait()  # raised once, not again


def test_final_save_after_wait(location):
    mgr = location.manager()
    mgr.save_async(state_for(8), 8)
    mgr.wait()
    info = mgr.save(state_for(9), 9)
    assert mgr.latest() == info


def test_bad_arguments_are_clear():
    with pytest.raises(CheckpointError, match="keep_last must be a whole number >= 1"):
        CheckpointManager("file:///tmp/x", keep_last=0)
    mgr = CheckpointManager("file:///tmp/x-unused")
    with pytest.raises(CheckpointError, match="step must be a whole number >= 0"):
        mgr.save({}, -1)


def test_closed_manager_refuses_saves(tmp_path):
    with CheckpointManager(f"file://{tmp_path}") as mgr:
        mgr.save_async({"a": 1}, 1)
    assert mgr.latest().step == 1  # close() waited for the upload
    with pytest.raises(CheckpointError, match="closed"):
        mgr.save({"a": 2}, 2)


class BarrierBeforeCommit:
    """A real store whose commit waits until every racing writer reaches it."""

    def __init__(self, inner, barrier: threading.Barrier):
        self._inner, self._barrier = inner, barrier
        self.uri = inner.uri

    def create(self, key, data):
        self._barrier.wait(timeout=30)
        return self._inner.create(key, data)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_two_writers_of_one_step_one_wins_no_corruption(location):
    barrier = threading.Barrier(2)
    outcomes: dict[int, object] = {}

    def writer(i: int) -> None:
        mgr = CheckpointManager(store=BarrierBeforeCommit(location.store(), barrier))
        try:
            outcomes[i] = mgr.save({"writer": i, "w": np.full(50_000, float(i))}, 42)
        except CheckpointExistsError as err:
            outcomes[i] = err

    threads = [threading.Thread(target=writer, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, o in outcomes.items() if not isinstance(o, Exception)]
    assert len(winners) == 1 and len(outcomes) == 2
    state, info = location.manager().load_latest()
    assert info == outcomes[winners[0]]
    assert state["writer"] == winners[0] and np.all(state["w"] == winners[0])
    assert location.store().list("data/") == [info.data_key]  # the loser's data was removed
