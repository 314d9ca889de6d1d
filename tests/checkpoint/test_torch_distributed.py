"""Distributed saves through fleet.checkpoint.torch: real gloo ranks (separate processes) on CPU,
against a local directory and moto S3. Skipped where torch is not installed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from rank_jobs import reports, run_ranks  # noqa: E402
from torch_ranks import digest, weights  # noqa: E402

from fleet.checkpoint import CheckpointError  # noqa: E402
from fleet.checkpoint.torch import load  # noqa: E402


@pytest.mark.parametrize("kind,world", [("file", 3), ("s3", 2)])
def test_every_rank_writes_its_shard_and_one_commit_makes_the_step_visible(location_factory, kind, world):
    loc = location_factory(kind)
    seen = reports(run_ranks("save", loc.uri, loc.env, world))
    assert [r["committed"] for r in seen] == [2] * world
    assert all(r["objects"] == world and r["loaded"] == 2 and r["same"] for r in seen)
    assert [r["rank_loaded"] for r in seen] == list(range(world))  # each rank got its own shard

    mgr = loc.manager()
    assert [i.step for i in mgr.list()] == [1, 2]
    newest = mgr.latest(verify=True)
    assert [p.key.rsplit("-", 1)[1] for p in newest.objects] == [f"r{r}.ckpt" for r in range(world)]
    assert len({p.key.split("-")[2] for p in newest.objects}) == 1  # one save token for all shards
    with pytest.raises(CheckpointError, match=f"sharded checkpoint \\({world} data objects\\)"):
        load(mgr)  # one process cannot take N shards
    with pytest.raises(CheckpointError, match="sharded checkpoint"):
        mgr.load_latest()  # refused, never skipped as corrupt

    resumed = reports(run_ranks("resume", loc.uri, loc.env, world))
    assert [(r["loaded"], r["rank_loaded"]) for r in resumed] == [(2, r) for r in range(world)]
    assert [r["weights"] for r in resumed] == [digest(weights(r, 2)) for r in range(world)]
    if world > 2:  # an elastic job that shrank is told to use DCP
        shrunk = run_ranks("resume", loc.uri, loc.env, 2)
        assert all(
            r.returncode != 0
            and f"saved by {world} rank(s); this job has 2" in r.stderr
            and "fleet.checkpoint.dcp" in r.stderr
            for r in shrunk
        )


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_a_failing_rank_means_no_rank_commits(location_factory, kind):
    loc = location_factory(kind)
    seen = reports(run_ranks("bad-rank", loc.uri, loc.env))
    for r in seen:  # every rank learns, naming the rank and cause
        assert "step 2 not committed: rank 1: UnsupportedStateError" in r["error"]
    mgr = loc.manager()
    assert [i.step for i in mgr.list()] == [1]
    assert not [k for k in mgr.store.list("data/") if "step-000000000002" in k]  # rank 0 removed its shard


def test_a_rank_killed_while_writing_leaves_the_step_invisible(location_factory):
    loc = location_factory("file")
    results = run_ranks("die-writing", loc.uri, loc.env)
    assert results[1].returncode == -9  # SIGKILL mid-write
    assert results[0].returncode != 0 and results[0].report is None  # the survivor fails, no commit
    mgr = loc.manager()
    assert [i.step for i in mgr.list()] == [1]
    assert any("step-000000000002" in k for k in mgr.store.list("data/"))  # written, never visible

    resumed = reports(run_ranks("resume", loc.uri, loc.env))
    assert [r["loaded"] for r in resumed] == [1, 1]
    assert [r["weights"] for r in resumed] == [digest(weights(r, 1)) for r in range(2)]
