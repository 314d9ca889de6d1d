"""Hugging Face ``Trainer`` glue (``pip install 'spotfleet[hf]'``): its checkpoints through fleet.checkpoint.

::

    from fleet.checkpoint.integrations.hf import FleetTrainerCallback

    fleet = FleetTrainerCallback(keep_last=3)                     # $SPOTFLEET_CHECKPOINT_URI
    args = TrainingArguments(output_dir="out", save_strategy="steps", save_steps=100, ...)
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[fleet])
    trainer.train(resume_from_checkpoint=fleet.restore(args.output_dir))   # None on a fresh start

Contract:

- Every checkpoint the Trainer writes (``output_dir/checkpoint-N``: weights, optimizer, scheduler,
  scaler, RNG, ``trainer_state.json``) is uploaded on ``on_save`` as step N of a
  :class:`~fleet.checkpoint.CheckpointManager`: one atomic, checksum verified object holding every
  file of the folder, keep-N by the manager's retention, in any store. The upload finishes before
  the Trainer goes on (so a notice's final save is committed when training stops).
- ``restore(output_dir)`` downloads the newest checkpoint that verifies (falling back past corrupt
  ones) into ``output_dir/checkpoint-N`` and returns that folder for ``resume_from_checkpoint``;
  the Trainer then restores everything itself and skips the batches it had consumed. None when
  the location holds no checkpoint.
- The notice: ``fleet run`` / ``fleet agent`` signal the job (SIGTERM or SIGUSR1); at the end of
  the current step the callback asks the Trainer to save and stop. A step saved already (by
  ``save_steps``) is not uploaded twice.
- The files are the Trainer's own formats, some of them pickles (``optimizer.pt``,
  ``rng_state.pth``): restore only from locations you trust. The folder is uploaded from the world
  process zero as it sees it, so with several nodes ``output_dir`` must be shared.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fleet.checkpoint.errors import CheckpointError, CorruptCheckpointError
from fleet.checkpoint.manager import CheckpointManager
from fleet.checkpoint.signals import DEFAULT_SIGNALS, StopRequest, install_signal_handler

try:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
except ImportError as _err:  # pragma: no cover - exercised only where transformers is absent
    raise ImportError("fleet.checkpoint.integrations.hf needs transformers: pip install 'spotfleet[hf]'") from _err

log = logging.getLogger("fleet.checkpoint")
FILES = "files"


def read_folder(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its relative POSIX path."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def write_folder(folder: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` (relative path -> bytes) under ``folder``; a path leaving it is refused."""
    root = folder.resolve()
    for name, data in files.items():
        target = (root / name).resolve()
        if not isinstance(data, bytes) or root not in target.parents:
            raise CorruptCheckpointError(f"the checkpoint names file {name!r} outside its folder or not as bytes")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


class FleetTrainerCallback(TrainerCallback):
    """Uploads the Trainer's checkpoints, restores the newest, and turns a notice into a final save.

    ``mgr`` defaults to ``CheckpointManager(keep_last=keep_last)`` on ``$SPOTFLEET_CHECKPOINT_URI``.
    Create it in the main thread (it installs the signal handlers; ``signals=()`` installs none).
    """

    def __init__(
        self, mgr: CheckpointManager | None = None, *, keep_last: int = 3, signals: Iterable[int] = DEFAULT_SIGNALS
    ):
        self.mgr = mgr if mgr is not None else CheckpointManager(keep_last=keep_last)
        signals = tuple(signals)
        self.stop: StopRequest | None = install_signal_handler(signals=signals) if signals else None
        self.notice_step: int | None = None
        self.last_step: int | None = None

    def restore(self, output_dir: str | Path) -> str | None:
        """Download the newest checkpoint that verifies into ``output_dir/checkpoint-N``; its path,
        or None when there is none."""
        found = self.mgr.load_latest()
        if found is None:
            return None
        state, info = found
        files = state.get(FILES) if isinstance(state, dict) else None
        if not isinstance(files, dict) or not files:
            raise CheckpointError(
                f"{self.mgr.uri}: step {info.step} is not a Trainer checkpoint "
                "(saved by something else than FleetTrainerCallback)"
            )
        folder = Path(output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{info.step}"
        write_folder(folder, files)
        log.info("%s: restored step %d into %s", self.mgr.uri, info.step, folder)
        return str(folder)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if self.stop:
            control.should_save = True
            control.should_training_stop = True
            self.notice_step = state.global_step
            log.info("%s: interruption signal: saving step %d and stopping", self.mgr.uri, state.global_step)
        return control

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if state.is_world_process_zero and state.global_step != self.last_step:
            folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            if not folder.is_dir():
                raise CheckpointError(f"the Trainer saved no folder {folder} (custom output_dir per trial?)")
            self.mgr.save({FILES: read_folder(folder)}, state.global_step)
            self.last_step = state.global_step
        return control
