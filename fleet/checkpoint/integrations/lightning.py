"""PyTorch Lightning glue (``pip install 'spotfleet[lightning]'``): checkpoints through fleet.checkpoint.

One callback does it all::

    from fleet.checkpoint.integrations.lightning import FleetCheckpoint

    ckpt = FleetCheckpoint(every_n_train_steps=100, keep_last=3)   # $SPOTFLEET_CHECKPOINT_URI
    trainer = Trainer(callbacks=[ckpt], enable_checkpointing=False)
    trainer.fit(model, ckpt_path=ckpt.resume_path)                   # None on a fresh start

Contract:

- Saves go through :class:`FleetCheckpointIO`, which the callback installs as the strategy's
  ``CheckpointIO`` in ``setup``: Lightning's full checkpoint dict (weights, optimizers, schedulers,
  loops, callbacks' state) becomes step ``global_step`` of a :class:`~fleet.checkpoint.CheckpointManager`
  — atomic, checksum verified, keep-N (the manager's retention; Lightning's ``remove_checkpoint`` is
  a no-op), in any store. Tensors use the safe format: loading runs no code.
- ``resume_path`` is ``"fleet:latest"`` when the location holds a checkpoint (else None); Lightning
  then loads the newest one that verifies, falling back past corrupt ones, and continues at its
  exact batch. ``"fleet:step=N"`` loads step N.
- The notice: ``fleet run`` / ``fleet agent`` signal the job (SIGTERM, or SIGUSR1). The callback
  watches both; at the next batch end (any rank's signal counts, decided on every rank) it saves
  the current step, waits for it to be committed, and stops training (on SIGTERM Lightning
  itself then raises its ``SIGTERMException``, a ``SystemExit``, so the process ends).
- Lightning saves from global rank 0 only, so this is for strategies whose rank 0 holds the whole
  state (single device, DDP); for sharded models use :mod:`fleet.checkpoint.dcp`.
- Training that ends (``max_steps``, ``max_epochs``) saves its last step too.
- A second save of the step this plugin saved last (Lightning's ``ModelCheckpoint`` writes a
  step's checkpoint and ``last.ckpt``) is skipped, never raised.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.manager import CheckpointManager
from fleet.checkpoint.signals import DEFAULT_SIGNALS, StopRequest, install_signal_handler

try:
    import pytorch_lightning as pl
    from pytorch_lightning.plugins import CheckpointIO, TorchCheckpointIO
except ImportError:  # pragma: no cover - the unified package instead of pytorch-lightning
    try:
        import lightning.pytorch as pl  # type: ignore[no-redef]
        from lightning.pytorch.plugins import CheckpointIO, TorchCheckpointIO  # type: ignore[no-redef]
    except ImportError as _err:
        raise ImportError(
            "fleet.checkpoint.integrations.lightning needs PyTorch Lightning: pip install 'spotfleet[lightning]'"
        ) from _err

from fleet.checkpoint.tensors import from_storable, to_storable  # noqa: E402  (needs torch)

log = logging.getLogger("fleet.checkpoint")
LATEST = "fleet:latest"
_STEP_PATH = re.compile(r"fleet:step=(\d+)$")


def step_path(step: int) -> str:
    """The Lightning "path" of checkpoint ``step`` (for ``trainer.save_checkpoint`` or ``ckpt_path``)."""
    return f"fleet:step={int(step)}"


class FleetCheckpointIO(CheckpointIO):
    """Lightning's ``CheckpointIO`` on a :class:`~fleet.checkpoint.CheckpointManager` (see the module doc).

    The checkpoint's ``global_step`` is its step; the path Lightning passes is ignored on save.
    ``background=True`` snapshots in the caller and uploads behind (``mgr.save_async``);
    ``teardown`` waits for it.
    """

    def __init__(self, mgr: CheckpointManager, *, background: bool = False):
        self.mgr, self.background = mgr, background
        self.last_step: int | None = None

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        step = checkpoint.get("global_step")
        if not isinstance(step, int):
            raise CheckpointError(f"the Lightning checkpoint has no integer global_step (got {step!r})")
        if step == self.last_step:
            log.debug("%s: step %d saved already; skipping the save to %s", self.mgr.uri, step, path)
            return
        state = to_storable(checkpoint)
        if self.background:
            self.mgr.save_async(state, step)
        else:
            self.mgr.save(state, step)
        self.last_step = step

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: bool | None = None) -> dict[str, Any]:
        where = str(path)
        match = _STEP_PATH.match(where)
        if where == LATEST:
            found = self.mgr.load_latest()
            if found is None:
                raise CheckpointError(f"{self.mgr.uri}: no checkpoint to resume from")
            state, info = found
        elif match:
            info = next((i for i in self.mgr.list() if i.step == int(match.group(1))), None)
            if info is None:
                raise CheckpointError(f"{self.mgr.uri}: no committed checkpoint at step {match.group(1)}")
            state = self.mgr.load(info)
        else:
            raise CheckpointError(
                f"ckpt_path {where!r} is not a fleet checkpoint; use {LATEST!r} or "
                "'fleet:step=N' (FleetCheckpoint.resume_path)"
            )
        log.info("%s: resuming from step %d", self.mgr.uri, info.step)
        self.last_step = info.step
        return from_storable(state, map_location if map_location is not None else "cpu")

    def remove_checkpoint(self, path: Any) -> None:
        """Retention is the manager's (``keep_last`` and friends): nothing to remove here."""

    def teardown(self) -> None:
        self.mgr.wait()


class FleetCheckpoint(pl.Callback):
    """Periodic saves, resume and the notice's final save for a Lightning ``Trainer``.

    ``mgr`` defaults to ``CheckpointManager(keep_last=keep_last)`` on ``$SPOTFLEET_CHECKPOINT_URI``.
    ``every_n_train_steps=0`` saves only on a notice. Create it in the main thread (it installs
    the signal handlers; ``signals=()`` installs none).
    """

    def __init__(
        self,
        mgr: CheckpointManager | None = None,
        *,
        every_n_train_steps: int = 0,
        keep_last: int = 3,
        background: bool = False,
        signals: Iterable[int] = DEFAULT_SIGNALS,
    ):
        if every_n_train_steps < 0:
            raise CheckpointError(f"every_n_train_steps must be >= 0, got {every_n_train_steps!r}")
        self.mgr = mgr if mgr is not None else CheckpointManager(keep_last=keep_last)
        self.io = FleetCheckpointIO(self.mgr, background=background)
        self.every = every_n_train_steps
        signals = tuple(signals)
        self.stop: StopRequest | None = install_signal_handler(signals=signals) if signals else None
        self.notice_step: int | None = None

    @property
    def resume_path(self) -> str | None:
        """``"fleet:latest"`` when the location holds an intact checkpoint, else None."""
        return LATEST if self.mgr.latest() is not None else None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        current = trainer.strategy._checkpoint_io  # None until something asks for the default
        if current is not None and current is not self.io and type(current) is not TorchCheckpointIO:
            raise CheckpointError(
                f"FleetCheckpoint saves through its own CheckpointIO; remove the "
                f"{type(current).__name__} plugin from the Trainer"
            )
        trainer.strategy.checkpoint_io = self.io

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        signalled = bool(self.stop) or trainer.received_sigterm
        stopping = trainer.strategy.reduce_boolean_decision(signalled, all=False)
        step = trainer.global_step
        if stopping or (self.every and step % self.every == 0):
            trainer.save_checkpoint(step_path(step))
        if stopping:
            self.mgr.wait()  # committed before the agent's deadline, not behind it
            self.notice_step = step
            trainer.should_stop = True
            log.info("%s: interruption signal: saved step %d, stopping", self.mgr.uri, step)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        trainer.save_checkpoint(step_path(trainer.global_step))  # the finished state (a no-op if just saved)
        self.mgr.wait()

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self.mgr.wait()


__all__ = ["LATEST", "FleetCheckpoint", "FleetCheckpointIO", "step_path"]
