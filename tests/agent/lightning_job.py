"""A Lightning training job for the notice tests: FleetCheckpoint on $SPOTFLEET_CHECKPOINT_URI.

Prints ``step N`` after each optimizer step (N = global_step), resumes from the newest checkpoint,
and saves every 5 steps; a notice signal from ``fleet run`` makes it save the current step and end.
"""

from __future__ import annotations

import time

import pytorch_lightning as pl
import torch

from fleet.checkpoint.integrations.lightning import FleetCheckpoint


class Job(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        time.sleep(0.02)
        return torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        print(f"step {self.global_step}", flush=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def train_dataloader(self):
        x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)


if __name__ == "__main__":
    ckpt = FleetCheckpoint(every_n_train_steps=5)
    trainer = pl.Trainer(
        max_steps=100_000,
        callbacks=[ckpt],
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(Job(), ckpt_path=ckpt.resume_path)
