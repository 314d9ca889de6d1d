"""The PyTorch helper (skipped where torch is not installed; CI installs the CPU build)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fleet.checkpoint import CheckpointError, CheckpointManager, DataPosition  # noqa: E402
from fleet.checkpoint.torch import ResumableSampler, capture, restore  # noqa: E402


def build(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(8, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    return model, opt, sched


def train(model, opt, sched, x, y, steps: int) -> list[float]:
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)  # dropout draws from the torch RNG
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def test_resume_continues_bit_identically(tmp_path):
    x, y = torch.randn(32, 4, generator=torch.Generator().manual_seed(1)), torch.randn(32, 1)
    model, opt, sched = build()
    straight = train(model, opt, sched, x, y, 10)

    model, opt, sched = build()
    first = train(model, opt, sched, x, y, 4)
    mgr = CheckpointManager(f"file://{tmp_path}")
    mgr.save(capture(model=model, optimizer=opt, scheduler=sched, step=4), 4)
    model, opt, sched = build(seed=123)  # a fresh process would rebuild from scratch
    torch.manual_seed(999)
    extra = restore(mgr.load_latest()[0], model=model, optimizer=opt, scheduler=sched)
    assert extra == {"step": 4}
    assert first + train(model, opt, sched, x, y, 6) == straight


def test_restore_names_missing_objects():
    model, opt, _ = build()
    with pytest.raises(CheckpointError, match="no optimizer state"):
        restore(capture(model=model), model=model, optimizer=opt)


def test_sampler_resumes_mid_epoch():
    straight = list(ResumableSampler(DataPosition(size=9, batch_size=3, seed=2)))
    pos = DataPosition(size=9, batch_size=3, seed=2)
    it = iter(ResumableSampler(pos))
    head = [next(it) for _ in range(4)]
    resumed = DataPosition(size=9, batch_size=3, seed=2)
    resumed.load_state_dict(pos.state_dict())
    assert head + list(ResumableSampler(resumed)) == straight
