"""PyTorch Lightning through fleet.checkpoint: periodic saves, the notice's final save, exact resume.

Real ``pytorch_lightning`` Trainer on CPU (skipped where the ``lightning`` extra is absent). The
notice is a real SIGTERM to this process, as ``fleet run`` sends it; Lightning's own SIGTERM
handler runs alongside ours.
"""

from __future__ import annotations

import os
import signal

import pytest

torch = pytest.importorskip("torch")
pl = pytest.importorskip("pytorch_lightning")
torchdata = pytest.importorskip("torchdata.stateful_dataloader")

from pytorch_lightning.utilities.exceptions import SIGTERMException  # noqa: E402

from fleet.checkpoint import CheckpointError  # noqa: E402
from fleet.checkpoint.integrations.lightning import LATEST, FleetCheckpoint  # noqa: E402

STEPS = 12


class Regression(pl.LightningModule):
    """A linear model on fixed data; sends itself SIGTERM in the batch that makes ``notice_at``."""

    def __init__(self, notice_at: int = -1):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Linear(4, 1)
        self.notice_at = notice_at

    def training_step(self, batch, batch_idx):
        if self.global_step == self.notice_at:
            os.kill(os.getpid(), signal.SIGTERM)
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)
        return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)]

    def train_dataloader(self):
        g = torch.Generator().manual_seed(1)
        x = torch.randn(64, 4, generator=g)
        data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True) + 0.1 * torch.randn(64, 1, generator=g))
        return torchdata.StatefulDataLoader(
            data, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(2)
        )


def trainer(*callbacks) -> pl.Trainer:
    return pl.Trainer(
        max_steps=STEPS,
        callbacks=list(callbacks),
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
    )


def weights(model: Regression) -> list:
    return [p.detach().clone() for p in model.parameters()]


def test_notice_saves_and_stops_then_a_restart_resumes_bit_identically(tmp_path, glue):
    straight = Regression()
    trainer().fit(straight)

    uri = f"file://{tmp_path}"
    first = glue(FleetCheckpoint, uri, every_n_train_steps=4)
    assert first.resume_path is None  # a fresh start: nothing to resume
    with pytest.raises(SIGTERMException):  # Lightning ends the process on SIGTERM, after our save
        trainer(first).fit(Regression(notice_at=5))
    assert first.notice_step == 6  # the batch that got the signal, completed
    steps = [i.step for i in first.mgr.list()]
    assert steps == [4, 6]  # periodic 4, final 6 (keep_last=2)

    second = glue(FleetCheckpoint, uri, every_n_train_steps=4)  # the restarted job
    assert second.resume_path == LATEST
    resumed = Regression()
    t = trainer(second)
    t.fit(resumed, ckpt_path=second.resume_path)
    assert t.global_step == STEPS and second.notice_step is None
    assert all(torch.equal(a, b) for a, b in zip(weights(resumed), weights(straight)))
    assert [i.step for i in second.mgr.list()] == [8, 12]  # keep-N is the manager's


def test_resume_skips_a_corrupt_newest_checkpoint(tmp_path, glue):
    uri = f"file://{tmp_path}"
    first = glue(FleetCheckpoint, uri, every_n_train_steps=3)
    t = trainer(first)
    t.fit(Regression())
    newest = first.mgr.list()[-1]
    blob = tmp_path / newest.objects[0].key
    blob.write_bytes(b"\0" * blob.stat().st_size)  # same size, wrong bytes

    second = glue(FleetCheckpoint, uri)
    restored = second.io.load_checkpoint(second.resume_path)
    assert restored["global_step"] == 9  # fell back past the corrupt 12
    assert isinstance(restored["state_dict"]["net.weight"], torch.Tensor)


def test_a_foreign_checkpoint_io_plugin_is_refused(tmp_path, glue):
    from pytorch_lightning.plugins import AsyncCheckpointIO

    cb = glue(FleetCheckpoint, f"file://{tmp_path}")
    t = pl.Trainer(
        max_steps=1,
        callbacks=[cb],
        plugins=[AsyncCheckpointIO()],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        accelerator="cpu",
    )
    with pytest.raises(CheckpointError, match="remove the AsyncCheckpointIO plugin"):
        t.fit(Regression())
    with pytest.raises(CheckpointError, match="not a fleet checkpoint"):
        cb.io.load_checkpoint("/tmp/epoch=0.ckpt")


def test_background_saves_are_committed_by_the_end_of_fit(tmp_path, glue):
    cb = glue(FleetCheckpoint, f"file://{tmp_path}", every_n_train_steps=5, background=True)
    trainer(cb).fit(Regression())
    assert [i.step for i in cb.mgr.list()] == [10, 12]  # periodic 5 and 10, the finished 12 (keep_last=2)
    assert cb.mgr.healthy
