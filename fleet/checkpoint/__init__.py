"""Resumable training: atomic checkpoints in object storage, keep the last N, resume the newest valid.

Quick use on a node (``SPOTFLEET_CHECKPOINT_URI`` is set by the fleet's startup script)::

    from fleet.checkpoint import CheckpointManager, install_signal_handler

    mgr = CheckpointManager(keep_last=3)
    stop = install_signal_handler()
    resumed = mgr.load_latest()                     # (state, info) or None
    ...
    mgr.save_async(state, step)                     # every N steps; training continues
    if stop.requested:                              # SIGTERM / SIGUSR1 from the agent
        mgr.save(state, step)                       # final checkpoint (waits for background saves)

A failed background save is logged at once; ``mgr.healthy`` turns False and the next
``save_async`` raises it. ``keep_every`` and ``keep_best``/``metric`` keep more than the newest N.

State is a dict of numpy arrays, bytes and plain Python values, stored by a safe serialiser
that never runs code on load (see :mod:`fleet.checkpoint.codec`); PyTorch state dicts (also
sharded over the ranks of a distributed job) go through :mod:`fleet.checkpoint.torch`, and
``torch.distributed.checkpoint`` through :mod:`fleet.checkpoint.dcp` (optional ``torch`` extra).
"""

from fleet.checkpoint.errors import (
    CheckpointError,
    CheckpointExistsError,
    CorruptCheckpointError,
    StaleStepError,
    UnsupportedStateError,
)
from fleet.checkpoint.layout import CheckpointInfo
from fleet.checkpoint.manager import URI_ENV, CheckpointManager
from fleet.checkpoint.signals import StopRequest, install_signal_handler
from fleet.checkpoint.state import DataPosition, capture_rng, restore_rng
from fleet.checkpoint.stores import ObjectStore, TransferSettings, open_store

__all__ = [
    "CheckpointError",
    "CheckpointExistsError",
    "CheckpointInfo",
    "CheckpointManager",
    "CorruptCheckpointError",
    "DataPosition",
    "ObjectStore",
    "StaleStepError",
    "StopRequest",
    "TransferSettings",
    "URI_ENV",
    "UnsupportedStateError",
    "capture_rng",
    "install_signal_handler",
    "open_store",
    "restore_rng",
]
