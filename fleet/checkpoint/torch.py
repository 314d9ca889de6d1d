"""PyTorch helper (optional extra ``spotfleet[torch]``): state dicts, modules, optimizers, RNG.

``save(mgr, state_dict, step)`` / ``load(mgr, state_dict)`` take what PyTorch users already
hold: a (nested) state dict whose values are tensors, plain values, or stateful objects (module,
optimizer, LR scheduler, ``GradScaler``: anything with ``state_dict``/``load_state_dict``).
``load`` fills the given objects and tensors in place, the way ``torch.distributed.checkpoint.load``
does, and also returns the loaded state::

    sd = {"model": model, "optimizer": opt, "scheduler": sched, "scaler": scaler, "step": 0}
    save(mgr, sd, step)                          # or save(..., background=True): returns a Future
    loaded = load(mgr, sd)                       # newest valid checkpoint; None when there is none
    if loaded: step = sd["step"]                 # model/opt/... restored, plain values replaced

In a ``torch.distributed`` job (process group of more than one rank) both are collective calls:
every rank writes its own shard and rank 0 commits the step once all have written
(:mod:`fleet.checkpoint.distributed`). Tensors are stored through the safe serialiser (no pickle).
For sharded models (FSDP/DTensor) use :mod:`fleet.checkpoint.dcp` with ``torch.distributed.checkpoint``.

``capture(...)`` turns the usual training objects into a plain state dict the checkpoint
manager can store; ``restore(state, ...)`` loads it back into freshly built objects::

    state = capture(model=model, optimizer=opt, scheduler=sched, step=step, data=pos.state_dict())
    mgr.save_async(state, step)
    ...
    state, info = mgr.load_latest()
    extra = restore(state, model=model, optimizer=opt, scheduler=sched)   # -> {"step": ..., "data": ...}

Each state_dict is serialised with ``torch.save`` into bytes (a snapshot: tensors are copied, GPU
tensors land in host memory) and loaded with ``torch.load(weights_only=True)``, PyTorch's
restricted unpickler, so loading a checkpoint does not execute arbitrary code. RNG states
(python, numpy, torch CPU and CUDA) are captured and restored too.

:class:`ResumableSampler` is a ``torch.utils.data.Sampler`` over a :class:`DataPosition`, so a
``DataLoader`` resumes mid-epoch at the next unseen sample.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping, MutableMapping
from concurrent.futures import Future
from typing import Any

from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.layout import CheckpointInfo
from fleet.checkpoint.manager import CheckpointManager
from fleet.checkpoint.state import DataPosition, capture_rng, restore_rng

try:
    import torch
    from torch.utils.data import Sampler
except ImportError as _err:  # pragma: no cover - exercised only where torch is absent
    raise ImportError("fleet.checkpoint.torch needs PyTorch: pip install 'spotfleet[torch]'") from _err

from fleet.checkpoint import distributed  # noqa: E402  (needs torch, imported above)
from fleet.checkpoint.tensors import Placement, from_storable, load_into, to_storable  # noqa: E402

_OBJECTS = ("model", "optimizer", "scheduler")


def save(
    mgr: CheckpointManager,
    state_dict: Mapping[str, Any],
    step: int,
    *,
    metrics: Mapping[str, float] | None = None,
    background: bool = False,
    group: Any = None,
) -> CheckpointInfo | Future[CheckpointInfo]:
    """Save a state dict (tensors, plain values, stateful objects) as ``step`` through ``mgr``.

    ``metrics`` feed the manager's ``keep_best`` retention. ``background=True`` snapshots now and
    uploads in the background (``mgr.save_async``); not with more than one rank, where the call is
    collective and every rank writes its shard (see :mod:`fleet.checkpoint.distributed`).
    """
    state = to_storable(dict(state_dict))
    if distributed.active(group):
        if background:
            raise CheckpointError(
                "background=True is not supported with more than one rank "
                "(the save is a collective call); save synchronously"
            )
        return distributed.save_sharded(mgr, state, step, metrics=metrics, group=group)
    if background:
        return mgr.save_async(state, step, metrics=metrics)
    return mgr.save(state, step, metrics=metrics)


def load(
    mgr: CheckpointManager,
    state_dict: MutableMapping[str, Any] | None = None,
    *,
    step: int | None = None,
    map_location: Any = "cpu",
    group: Any = None,
) -> tuple[dict[str, Any], CheckpointInfo] | None:
    """Load the newest valid checkpoint (or ``step``); fill ``state_dict`` in place when given.

    Returns ``(state, info)`` with tensors on ``map_location`` (stateful objects appear as their
    state dicts), or None when there is no checkpoint (``state_dict`` is then untouched). The
    checkpoint is read straight into the target's CPU tensors where dtype and shape match (no
    second copy); a checkpoint that then fails its checksum leaves unverified values in them
    and the next older one is loaded over them, as ever. Raises
    :class:`CheckpointError` when the target holds a key the checkpoint lacks, or when a
    checkpoint saved by several ranks is loaded by a different number of ranks.
    """
    placed = Placement(state_dict) if state_dict is not None else None
    if distributed.active(group):
        found = distributed.load_sharded(mgr, step=step, group=group)
        placed = None
    else:
        found = _load_single(mgr, step, placed)
    if found is None:
        return None
    tree, info = found
    if state_dict is not None:
        load_into(state_dict, tree, map_location, placed=placed)
    return from_storable(tree, map_location, placed=placed), info


def _load_single(
    mgr: CheckpointManager, step: int | None, placed: Placement | None
) -> tuple[dict[str, Any], CheckpointInfo] | None:
    """The checkpoint read straight into the target's tensors where they fit (``placed``)."""
    if step is None:
        found = mgr.load_latest(place=placed)
    else:
        info = next((i for i in mgr.list() if i.step == step), None)
        if info is None:
            raise CheckpointError(f"{mgr.uri}: no committed checkpoint at step {step}")
        found = (mgr.load(info, place=placed), info)
    return found


def _to_bytes(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _from_bytes(data: bytes, map_location: Any) -> Any:
    return torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)


def capture(
    *,
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A storable snapshot of the given objects, every RNG state, and ``extra`` plain values."""
    state: dict[str, Any] = {"rng": capture_rng(), "extra": extra}
    for name, obj in zip(_OBJECTS, (model, optimizer, scheduler)):
        if obj is not None:
            state[name] = _to_bytes(obj.state_dict())
    return state


def restore(
    state: Mapping[str, Any],
    *,
    model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any | None = None,
    map_location: Any = "cpu",
) -> dict[str, Any]:
    """Load ``state`` into the given objects and restore RNG states; returns the ``extra`` values.

    Raises :class:`CheckpointError` when an object is passed that the checkpoint does not hold.
    """
    for name, obj in zip(_OBJECTS, (model, optimizer, scheduler)):
        if obj is None:
            continue
        if name not in state:
            raise CheckpointError(f"the checkpoint holds no {name} state (it has {sorted(state)})")
        obj.load_state_dict(_from_bytes(state[name], map_location))
    restore_rng(state["rng"])
    return dict(state.get("extra", {}))


class ResumableSampler(Sampler[int]):
    """Yields sample indices from a :class:`DataPosition`, advancing it as the loader consumes them.

    Iterating yields the rest of the current epoch (all of it for a fresh epoch); save
    ``position.state_dict()`` with the checkpoint. With ``num_workers > 0`` the loader prefetches,
    so record the position from the batches the training loop actually consumed.
    """

    def __init__(self, position: DataPosition):
        self.position = position

    def __len__(self) -> int:
        return (
            self.position.size - self.position.offset
            if self.position.offset < self.position.size
            else self.position.size
        )

    def __iter__(self) -> Iterator[int]:
        pos = self.position
        if pos.offset >= pos.size:
            pos.epoch, pos.offset = pos.epoch + 1, 0
        order = pos.order()
        while pos.offset < pos.size:
            index = int(order[pos.offset])
            pos.offset += 1
            yield index
