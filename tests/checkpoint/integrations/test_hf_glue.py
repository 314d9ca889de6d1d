"""The Hugging Face Trainer through fleet.checkpoint: uploads, the notice's final save, exact resume.

A real ``transformers.Trainer`` on CPU with a tiny GPT-2 built from a config in code (no
downloads); skipped where the ``hf`` extra is absent. The notice is a real SIGTERM to this process.
"""

from __future__ import annotations

import os
import signal

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from fleet.checkpoint import CheckpointError, CheckpointManager  # noqa: E402
from fleet.checkpoint.integrations.hf import FleetTrainerCallback  # noqa: E402

STEPS = 8


class Notice(transformers.TrainerCallback):
    """Sends this process SIGTERM as step ``at`` begins (the agent's hook signal)."""

    def __init__(self, at: int):
        self.at = at

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.at:
            os.kill(os.getpid(), signal.SIGTERM)


def dataset() -> list[dict]:
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 40, (48, 8), generator=g)
    return [{"input_ids": row, "labels": row} for row in ids]


def run(out, *callbacks, resume: str | None = None) -> transformers.Trainer:
    config = transformers.GPT2Config(vocab_size=40, n_positions=8, n_embd=16, n_layer=1, n_head=2)
    transformers.set_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    args = transformers.TrainingArguments(
        output_dir=str(out),
        max_steps=STEPS,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        save_strategy="steps",
        save_steps=3,
        report_to=[],
        use_cpu=True,
        seed=0,
        logging_strategy="no",
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=dataset(), callbacks=list(callbacks))
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def weights(trainer) -> list:
    return [p.detach().clone() for p in trainer.model.parameters()]


def test_notice_saves_and_stops_then_a_restart_on_a_fresh_disk_resumes_bit_identically(tmp_path, glue):
    straight = run(tmp_path / "straight")

    uri = f"file://{tmp_path}/store"
    first = glue(FleetTrainerCallback, uri)
    assert first.restore(tmp_path / "node1") is None  # a fresh start: nothing to resume
    stopped = run(tmp_path / "node1", first, Notice(at=4))
    assert first.notice_step == stopped.state.global_step == 5
    assert [i.step for i in first.mgr.list()] == [3, 5]  # periodic 3, the notice's 5

    second = glue(FleetTrainerCallback, uri)  # the replacement node: empty output_dir
    folder = second.restore(tmp_path / "node2")
    assert folder is not None and folder.endswith("checkpoint-5")
    resumed = run(tmp_path / "node2", second, resume=folder)
    assert resumed.state.global_step == STEPS and second.notice_step is None
    assert all(torch.equal(a, b) for a, b in zip(weights(resumed), weights(straight)))
    assert [i.step for i in second.mgr.list()] == [6, 8]  # keep-N is the manager's


def test_restore_skips_a_corrupt_newest_and_refuses_a_foreign_checkpoint(tmp_path, glue):
    uri = f"file://{tmp_path}/store"
    cb = glue(FleetTrainerCallback, uri)
    run(tmp_path / "node1", cb)
    newest = cb.mgr.list()[-1]
    blob = tmp_path / "store" / newest.objects[0].key
    blob.write_bytes(b"\0" * blob.stat().st_size)
    assert cb.restore(tmp_path / "node2").endswith("checkpoint-6")

    other = CheckpointManager(f"file://{tmp_path}/other")
    other.save({"weights": b"x"}, 1)
    with pytest.raises(CheckpointError, match="not a Trainer checkpoint"):
        FleetTrainerCallback(other, signals=()).restore(tmp_path / "node3")
