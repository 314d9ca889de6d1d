"""Plain PyTorch state dicts through fleet.checkpoint.torch.save/load (skipped where torch is absent)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fleet.checkpoint import CheckpointError, CheckpointManager  # noqa: E402
from fleet.checkpoint.torch import load, save  # noqa: E402


def build(kind: str, seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    opt = (torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9) if kind == "sgd"
           else torch.optim.Adam(model.parameters(), lr=0.01))
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

    fresh = build(kind, seed=99)                              # rebuilt from scratch, other weights
    target = objects(*fresh)
    loaded = load(mgr, target)
    assert loaded is not None and loaded[1].step == 3
    assert target["step"] == 3                                # plain values are replaced in place
    assert fresh[3].get_scale() == parts[3].get_scale()
    assert fresh[2].last_epoch == parts[2].last_epoch
    resumed = train(*fresh, steps=4)
    assert all(torch.equal(a, b) for a, b in zip(resumed, straight))


def test_tensors_round_trip_bit_identically_and_load_in_place(tmp_path):
    g = torch.Generator().manual_seed(3)
    sd = {"w": torch.randn(5, 7, generator=g), "half": torch.randn(9, generator=g).half(),
          "bf16": torch.randn(4, 4, generator=g).bfloat16(), "f8": torch.randn(8, generator=g).to(torch.float8_e4m3fn),
          "ints": torch.arange(6, dtype=torch.int64).reshape(2, 3), "mask": torch.tensor([True, False]),
          "scalar": torch.tensor(2.5), "strided": torch.randn(6, 6, generator=g).t(),
          "nested": {"ids": [1, 2, 3], "pair": (torch.ones(2), "x")}}
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
    assert target["w"] is same_w and torch.equal(same_w, sd["w"])           # filled, not replaced
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
    assert [i.step for i in mgr.list()] == [5, 10, 20]        # best, every 10th, newest
    target = {"model": torch.nn.Linear(2, 2)}
    load(mgr, target, step=5)
    assert torch.equal(target["model"].weight, model.weight)
