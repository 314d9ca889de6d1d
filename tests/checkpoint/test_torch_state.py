"""Plain PyTorch state dicts through fleet.checkpoint.torch.save/load (skipped where torch is absent)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fleet.checkpoint import CheckpointError, CheckpointManager  # noqa: E402
from fleet.checkpoint.torch import load, save  # noqa: E402


def build(kind: str, seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    opt = (
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        if kind == "sgd"
        else torch.optim.Adam(model.parameters(), lr=0.01)
    )
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.7)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2)
    return model, opt, sched, scaler


def data():
    g = torch.Generator().manual_seed(7)
    return torch.randn(24, 6, generator=g), torch.randn(24, 2, generator=g)


def train(model, opt, sched, scaler, steps: int) -> list[torch.Tensor]:
    x, y = data()
    for _ in range(steps):
        opt.zero_grad()
        scaler.scale(torch.nn.functional.mse_loss(model(x), y)).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
    return [p.detach().clone() for p in model.parameters()]


def objects(model, opt, sched, scaler, step: int = 0) -> dict:
    return {"model": model, "optimizer": opt, "scheduler": sched, "scaler": scaler, "step": step}


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_resume_through_save_and_load_equals_the_uninterrupted_run(tmp_path, kind):
    straight = train(*build(kind), steps=7)

    parts = build(kind)
    train(*parts, steps=3)
    mgr = CheckpointManager(f"file://{tmp_path}")
    save(mgr, objects(*parts, step=3), 3)

    fresh = build(kind, seed=99)  # rebuilt from scratch, other weights
    target = objects(*fresh)
    loaded = load(mgr, target)
    assert loaded is not None and loaded[1].step == 3
    assert target["step"] == 3  # plain values are replaced in place
    assert fresh[3].get_scale() == parts[3].get_scale()
    assert fresh[2].last_epoch == parts[2].last_epoch
    resumed = train(*fresh, steps=4)
    assert all(torch.equal(a, b) for a, b in zip(resumed, straight))


def test_tensors_round_trip_bit_identically_and_load_in_place(tmp_path):
    g = torch.Generator().manual_seed(3)
    sd = {
        "w": torch.randn(5, 7, generator=g),
        "half": torch.randn(9, generator=g).half(),
        "bf16": torch.randn(4, 4, generator=g).bfloat16(),
        "f8": torch.randn(8, generator=g).to(torch.float8_e4m3fn),
        "ints": torch.arange(6, dtype=torch.int64).reshape(2, 3),
        "mask": torch.tensor([True, False]),
        "scalar": torch.tensor(2.5),
        "strided": torch.randn(6, 6, generator=g).t(),
        "nested": {"ids": [1, 2, 3], "pair": (torch.ones(2), "x")},
    }
    mgr = CheckpointManager(f"file://{tmp_path}")
    save(mgr, sd, 1)

    state, info = load(mgr)
    for key in ("w", "half", "bf16", "f8", "ints", "mask", "scalar", "strided"):
        assert state[key].dtype == sd[key].dtype and state[key].shape == sd[key].shape
        assert torch.equal(state[key].view(-1).view(torch.uint8), sd[key].contiguous().view(-1).view(torch.uint8))
    assert state["nested"]["ids"] == [1, 2, 3] and torch.equal(state["nested"]["pair"][0], torch.ones(2))

    target = {"w": torch.zeros(5, 7), "bf16": torch.zeros(4, 4, dtype=torch.bfloat16), "nested": {"ids": []}}
    same_w, same_bf16 = target["w"], target["bf16"]
    load(mgr, target)
    assert target["w"] is same_w and torch.equal(same_w, sd["w"])  # filled, not replaced
    assert target["bf16"] is same_bf16 and torch.equal(same_bf16, sd["bf16"])
    assert target["nested"] == {"ids": [1, 2, 3]}


def test_a_target_key_the_checkpoint_lacks_is_named(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    save(mgr, {"w": torch.ones(3)}, 1)
    with pytest.raises(CheckpointError, match=r"\['extra'\]: not in the checkpoint"):
        load(mgr, {"w": torch.zeros(3), "extra": torch.zeros(1)})
    with pytest.raises(CheckpointError, match=r"\['w'\]: the checkpoint holds \(3,\)"):
        load(mgr, {"w": torch.zeros(4)})


def test_no_checkpoint_leaves_the_target_untouched(tmp_path):
    target = {"w": torch.ones(2)}
    assert load(CheckpointManager(f"file://{tmp_path}"), target) is None
    assert torch.equal(target["w"], torch.ones(2))


def test_background_save_and_keep_best_retention(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}", keep_last=1, keep_best=1, metric="val_loss", keep_every=10)
    model = torch.nn.Linear(2, 2)
    for step, val in [(5, 0.1), (10, 0.9), (15, 0.5), (20, 0.7)]:
        save(mgr, {"model": model}, step, metrics={"val_loss": val}, background=True)
    mgr.wait()
    assert [i.step for i in mgr.list()] == [5, 10, 20]  # best, every 10th, newest
    target = {"model": torch.nn.Linear(2, 2)}
    load(mgr, target, step=5)
    assert torch.equal(target["model"].weight, model.weight)


def test_the_readme_pattern_resumes_dropout_bit_identically(tmp_path):
    """The checkpoint guide's example (docs/checkpoints.md): RNG captured with the state, restored after load."""
    from fleet.checkpoint import capture_rng, restore_rng

    mgr = CheckpointManager(f"file://{tmp_path}")
    torch.manual_seed(5)
    drop = torch.nn.Dropout(0.5)
    sd = {"model": torch.nn.Linear(3, 3), "step": 4, "rng": capture_rng()}
    save(mgr, sd, 4)
    expected = drop(torch.ones(64))
    torch.manual_seed(99)  # a restarted process: other RNG state
    fresh = {"model": torch.nn.Linear(3, 3), "step": 0, "rng": None}
    assert load(mgr, fresh)
    restore_rng(fresh["rng"])
    assert fresh["step"] == 4 and torch.equal(drop(torch.ones(64)), expected)


def test_a_torch_generator_in_the_state_is_restored_into_the_target(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    gen = torch.Generator().manual_seed(11)
    save(mgr, {"gen": gen}, 1)
    expected = torch.rand(5, generator=gen)
    target = torch.Generator().manual_seed(0)
    state, _ = load(mgr, {"gen": target})
    assert torch.equal(torch.rand(5, generator=target), expected)
    assert isinstance(state["gen"], torch.Generator)


def test_another_torch_object_is_refused_naming_what_to_store_instead(tmp_path):
    from fleet.checkpoint import UnsupportedStateError

    with pytest.raises(
        UnsupportedStateError,
        match=r"state\['dev'\]: fleet.checkpoint.torch cannot store a "
        r"torch.device; put its state",
    ):
        save(CheckpointManager(f"file://{tmp_path}"), {"dev": torch.device("cpu")}, 1)


def test_a_load_reads_into_the_target_tensors_and_falls_back_past_a_corrupt_newest(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    old, new = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)
    save(mgr, {"model": old, "t": old.weight.detach().clone()}, 1)
    save(mgr, {"model": new, "t": new.weight.detach().clone()}, 2)
    target = {"model": torch.nn.Linear(64, 64), "t": torch.zeros(64, 64)}
    weight, t = target["model"].weight, target["t"]
    state, info = load(mgr, target)
    assert info.step == 2 and torch.equal(weight, new.weight) and torch.equal(t, new.weight)
    assert target["model"].weight is weight and target["t"] is t  # filled in place
    assert state["t"].data_ptr() == t.data_ptr()  # read straight into it
    newest = tmp_path / info.data_key
    data = bytearray(newest.read_bytes())
    data[-5] ^= 0xFF
    newest.write_bytes(data)
    _, info = load(mgr, target)
    assert info.step == 1 and torch.equal(weight, old.weight) and torch.equal(t, old.weight)


def test_tied_target_tensors_load_correctly(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    a, b = torch.arange(16.0), torch.arange(16.0) * 2
    save(mgr, {"a": a, "b": b}, 1)
    shared = torch.zeros(16)
    target = {"a": shared, "b": shared[:]}  # same memory twice
    load(mgr, target)
    assert torch.equal(shared, b)  # the later key wins, as copy_ does
