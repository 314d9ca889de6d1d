"""Retention beyond newest-N: every K-th step and the best few by a recorded metric."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.checkpoint import CheckpointError, CheckpointManager


def steps(mgr: CheckpointManager) -> list[int]:
    return [i.step for i in mgr.list()]


def test_keep_every_kth_step_besides_the_newest(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}", keep_last=2, keep_every=50)
    for step in range(10, 201, 10):
        mgr.save({"w": np.full(10, step)}, step)
    assert steps(mgr) == [50, 100, 150, 190, 200]
    assert len(mgr.store.list("data/")) == 5  # data of the kept K-th steps too
    assert mgr.load(mgr.list()[0])["w"][0] == 50


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_keep_best_by_a_metric(location_factory, kind):
    loc = location_factory(kind)
    losses = {1: 0.9, 2: 0.4, 3: 0.7, 4: 0.2, 5: 0.8, 6: 0.6, 7: 0.5}
    mgr = loc.manager(keep_last=2, keep_best=2, metric="val_loss")
    for step, loss in losses.items():
        mgr.save({"step": step}, step, metrics={"val_loss": loss, "epoch": step})
    assert steps(mgr) == [2, 4, 6, 7]  # best two (0.2, 0.4) + newest two
    assert {i.step: i.metrics["val_loss"] for i in mgr.list()}[4] == 0.2


def test_keep_best_by_the_highest_value_and_ties_keep_the_newer(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}", keep_last=1, keep_best=1, metric="acc", mode="max")
    for step, acc in ((1, 0.5), (2, 0.9), (3, 0.9), (4, 0.1), (5, 0.3)):
        mgr.save({"step": step}, step, metrics={"acc": acc})
    assert steps(mgr) == [3, 5]


def test_checkpoints_without_the_metric_never_count_as_best(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}", keep_last=1, keep_best=1, metric="val_loss")
    mgr.save({"s": 1}, 1)  # no metric recorded
    mgr.save({"s": 2}, 2, metrics={"val_loss": 3.0})
    mgr.save({"s": 3}, 3)
    assert steps(mgr) == [2, 3]


def test_async_saves_record_metrics_too(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}", keep_last=1, keep_best=1, metric="loss")
    for step, loss in ((1, 0.1), (2, 0.5), (3, 0.4)):
        mgr.save_async({"s": step}, step, metrics={"loss": loss})
    mgr.wait()
    assert steps(mgr) == [1, 3]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"keep_every": -1}, "keep_every must be a whole number >= 0"),
        ({"keep_best": 2}, "keep_best needs metric=NAME"),
        ({"keep_best": 1, "metric": "x", "mode": "lowest"}, "mode must be 'min' or 'max'"),
        ({"keep_last": 0}, "keep_last must be a whole number >= 1"),
    ],
)
def test_bad_retention_options_are_named(tmp_path, options, message):
    with pytest.raises(CheckpointError, match=message):
        CheckpointManager(f"file://{tmp_path}", **options)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "high"])
def test_metrics_must_be_finite_numbers(tmp_path, value):
    with pytest.raises(CheckpointError, match=r"metrics\['loss'\] must be a finite number"):
        CheckpointManager(f"file://{tmp_path}").save({}, 1, metrics={"loss": value})
