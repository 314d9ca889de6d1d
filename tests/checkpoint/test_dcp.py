"""torch.distributed.checkpoint through fleet.checkpoint.dcp: one process and real gloo ranks, on a
local directory and moto S3. Skipped where torch is not installed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.distributed.checkpoint as dcp  # noqa: E402
from rank_jobs import reports, run_ranks  # noqa: E402

from fleet.checkpoint.dcp import StorageReader, StorageWriter  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # DCP warns when there is no process group


def model_state(step: int) -> tuple[torch.nn.Module, torch.optim.Optimizer, dict]:
    torch.manual_seed(step)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(3, 5)).sum().backward()
    opt.step()
    return (
        model,
        opt,
        {
            "model": model.state_dict(),
            "optim": opt.state_dict(),
            "bf16": torch.randn(4, 4).bfloat16(),
            "extra": {"step": step, "tag": "run"},
        },
    )


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_dcp_save_lands_in_the_atomic_keep_n_layout_and_loads_in_place(location_factory, kind):
    loc = location_factory(kind)
    mgr = loc.manager(keep_last=2)
    for step in (1, 2, 3):
        _, _, sd = model_state(step)
        writer = StorageWriter(mgr, step, metrics={"loss": float(step)})
        dcp.save(sd, storage_writer=writer)
        assert writer.info is not None and writer.info.step == step
    assert [i.step for i in mgr.list()] == [2, 3]  # keep_last=2 pruned step 1
    assert not [k for k in mgr.store.list("data/") if "step-000000000001" in k]
    newest = mgr.latest(verify=True)
    assert newest.objects[0].key.endswith("-meta.ckpt") and newest.metrics == {"loss": 3.0}

    model, opt, expected = model_state(3)
    fresh_model, fresh_opt, target = model_state(7)  # other weights, same shapes
    weight = target["model"]["0.weight"]
    reader = StorageReader(mgr)
    dcp.load(target, storage_reader=reader)
    assert reader.info.step == 3
    assert target["model"]["0.weight"] is weight  # filled in place
    for key, value in expected["model"].items():
        assert torch.equal(target["model"][key], value)
    assert torch.equal(target["bf16"], expected["bf16"]) and target["extra"] == {"step": 3, "tag": "run"}
    fresh_opt.load_state_dict(target["optim"])
    assert torch.equal(fresh_opt.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])

    older = {"extra": {"step": 0, "tag": ""}}
    dcp.load(older, storage_reader=StorageReader(mgr, step=2))
    assert older["extra"]["step"] == 2


def test_dcp_refuses_a_step_below_a_newer_checkpoint_and_skips_a_corrupt_one(tmp_path):
    from fleet.checkpoint import CheckpointManager

    mgr = CheckpointManager(f"file://{tmp_path}", keep_last=3)
    for step in (1, 2):
        dcp.save({"w": torch.full((3,), float(step))}, storage_writer=StorageWriter(mgr, step))
    with pytest.raises(dcp.CheckpointException, match="StaleStepError.*refusing to save step 1"):
        dcp.save({"w": torch.zeros(3)}, storage_writer=StorageWriter(mgr, 1))
    newest = mgr.latest()
    store = mgr.store
    meta = newest.objects[0]
    raw = bytearray(store.download(meta.key, meta.size))
    raw[-5] ^= 0xFF  # same size, wrong bytes
    (tmp_path / meta.key).write_bytes(bytes(raw))
    target = {"w": torch.zeros(3)}
    reader = StorageReader(mgr)
    dcp.load(target, storage_reader=reader)
    assert reader.info.step == 1 and torch.equal(target["w"], torch.ones(3))
    with pytest.raises(dcp.CheckpointException, match="fails its XXH3-128 check"):
        dcp.load(target, storage_reader=StorageReader(mgr, step=2))


def test_dcp_with_nothing_saved_says_so(tmp_path):
    from fleet.checkpoint import CheckpointManager

    with pytest.raises(dcp.CheckpointException, match="no valid DCP checkpoint"):
        dcp.load({"w": torch.zeros(1)}, storage_reader=StorageReader(CheckpointManager(f"file://{tmp_path}")))


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_dcp_on_two_gloo_ranks_writes_one_shard_each_under_one_commit(location_factory, kind):
    loc = location_factory(kind)
    seen = reports(run_ranks("dcp", loc.uri, loc.env))
    assert all(r["loaded"] == 2 and r["objects"] == 3 for r in seen)  # metadata + one shard per rank
    assert all(r["shard_equal"] and r["full_equal"] and r["bias_equal"] and r["meta"] == {"step": 2} for r in seen)
    mgr = loc.manager()
    newest = mgr.latest(verify=True)
    assert [k.rsplit("-", 1)[1] for k in (p.key for p in newest.objects)] == ["meta.ckpt", "r0.ckpt", "r1.ckpt"]

    full = {"sharded": torch.zeros(12, 5)}  # DCP reshards: one process reads both
    dcp.load(full, storage_reader=StorageReader(mgr))
    assert torch.equal(full["sharded"], torch.arange(60, dtype=torch.float32).reshape(12, 5) * 2)


def test_dcp_rank_failure_commits_nothing(location_factory):
    loc = location_factory("file")
    seen = reports(run_ranks("dcp-bad-rank", loc.uri, loc.env))
    assert all("rank 1: (CheckpointError(" in r["error"] and "Not a directory" in r["error"] for r in seen)
    mgr = loc.manager()
    assert [i.step for i in mgr.list()] == [1]
    full = {"sharded": torch.zeros(12, 5)}
    dcp.load(full, storage_reader=StorageReader(mgr))
    assert torch.equal(full["sharded"], torch.arange(60, dtype=torch.float32).reshape(12, 5))


def test_dcp_load_falls_back_past_a_corrupt_data_object_like_the_plain_loader(tmp_path):
    from fleet.checkpoint import CheckpointManager
    from fleet.checkpoint.dcp import load

    mgr = CheckpointManager(f"file://{tmp_path}", keep_last=3)
    target = {"w": torch.zeros(64), "b": torch.zeros(2)}
    assert load(target, mgr) is None and torch.equal(target["w"], torch.zeros(64))  # nothing saved yet
    for step in (1, 2, 3):
        dcp.save(
            {"w": torch.full((64,), float(step)), "b": torch.ones(2) * step}, storage_writer=StorageWriter(mgr, step)
        )
    for step in (3, 2):  # the two newest: a data object with wrong bytes
        data = next(p for p in next(i for i in mgr.list() if i.step == step).objects if p.key.endswith("-r0.ckpt"))
        raw = bytearray((tmp_path / data.key).read_bytes())
        raw[10] ^= 0xFF
        (tmp_path / data.key).write_bytes(bytes(raw))
    w = target["w"]
    info = load(target, mgr)
    assert info.step == 1 and torch.equal(target["w"], torch.ones(64)) and target["w"] is w
    assert torch.equal(target["b"], torch.ones(2))
    with pytest.raises(dcp.CheckpointException, match="fails its XXH3-128 check"):
        load(target, mgr, step=3)
