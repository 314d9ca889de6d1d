"""Full-state helpers: RNG capture/restore, resumable data position, the signal flag."""

from __future__ import annotations

import os
import random
import signal

import numpy as np
import pytest

from fleet.checkpoint import CheckpointManager, DataPosition, capture_rng, install_signal_handler, restore_rng


def draw(gen: np.random.Generator) -> tuple:
    return random.random(), np.random.rand(), gen.standard_normal()


def test_rng_states_survive_a_checkpoint(tmp_path):
    random.seed(1)
    np.random.seed(2)
    gen = np.random.default_rng(3)
    draw(gen)
    mgr = CheckpointManager(f"file://{tmp_path}")
    mgr.save({"rng": capture_rng({"noise": gen})}, 1)
    expected = [draw(gen) for _ in range(5)]
    random.seed(99)
    np.random.seed(99)
    other = np.random.default_rng(99)
    restore_rng(mgr.load_latest()[0]["rng"], {"noise": other})
    assert [draw(other) for _ in range(5)] == expected


def test_restoring_an_unknown_generator_names_it():
    state = capture_rng({"a": np.random.default_rng(0)})
    with pytest.raises(KeyError, match="no state for RNG generator 'b'"):
        restore_rng(state, {"b": np.random.default_rng(0)})


def consume(pos: DataPosition, batches: int) -> list[list[int]]:
    return [pos.next_batch().tolist() for _ in range(batches)]


def test_data_position_resumes_without_repeating_or_skipping(tmp_path):
    straight = DataPosition(size=10, batch_size=4, seed=5)
    expected = consume(straight, 9)  # crosses several epochs, short last batches
    first = DataPosition(size=10, batch_size=4, seed=5)
    seen = consume(first, 4)
    mgr = CheckpointManager(f"file://{tmp_path}")
    mgr.save({"data": first.state_dict()}, 4)
    resumed = DataPosition(size=10, batch_size=4, seed=5)
    resumed.load_state_dict(mgr.load_latest()[0]["data"])
    assert seen + consume(resumed, 5) == expected
    epochs = [sorted(sum(expected[i : i + 3], [])) for i in (0, 3, 6)]
    assert all(e == list(range(10)) for e in epochs)  # every epoch is a permutation of the data


def test_data_position_refuses_a_changed_dataset():
    pos = DataPosition(size=10, batch_size=4)
    with pytest.raises(ValueError, match="saved with size=12, this run has size=10"):
        pos.load_state_dict(DataPosition(size=12, batch_size=4).state_dict())


def test_signal_sets_the_flag_and_calls_back():
    seen: list[int] = []
    before = signal.getsignal(signal.SIGUSR1)
    stop = install_signal_handler(seen.append, signals=(signal.SIGUSR1,))
    try:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGUSR1)
        assert stop.requested and stop.signal_name == "SIGUSR1" and seen == [signal.SIGUSR1]
    finally:
        stop.uninstall()
    assert signal.getsignal(signal.SIGUSR1) == before


def test_signal_handler_needs_the_main_thread():
    import threading

    errors: list[Exception] = []
    t = threading.Thread(target=lambda: _try(errors))
    t.start()
    t.join()
    assert errors and "main thread" in str(errors[0])


def _try(errors: list[Exception]) -> None:
    try:
        install_signal_handler()
    except RuntimeError as err:
        errors.append(err)
