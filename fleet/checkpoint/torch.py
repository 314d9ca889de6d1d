"""PyTorch helper (optional extra ``spotfleet[torch]``): modules, optimizers, schedulers, RNG.

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
from collections.abc import Iterator, Mapping
from typing import Any

from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.state import DataPosition, capture_rng, restore_rng

try:
    import torch
    from torch.utils.data import Sampler
except ImportError as _err:  # pragma: no cover - exercised only where torch is absent
    raise ImportError("fleet.checkpoint.torch needs PyTorch: pip install 'spotfleet[torch]'") from _err

_OBJECTS = ("model", "optimizer", "scheduler")


def _to_bytes(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _from_bytes(data: bytes, map_location: Any) -> Any:
    return torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)


def capture(*, model: torch.nn.Module | None = None, optimizer: torch.optim.Optimizer | None = None,
            scheduler: Any | None = None, **extra: Any) -> dict[str, Any]:
    """A storable snapshot of the given objects, every RNG state, and ``extra`` plain values."""
    state: dict[str, Any] = {"rng": capture_rng(), "extra": extra}
    for name, obj in zip(_OBJECTS, (model, optimizer, scheduler)):
        if obj is not None:
            state[name] = _to_bytes(obj.state_dict())
    return state


def restore(state: Mapping[str, Any], *, model: torch.nn.Module | None = None,
            optimizer: torch.optim.Optimizer | None = None, scheduler: Any | None = None,
            map_location: Any = "cpu") -> dict[str, Any]:
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
        return self.position.size - self.position.offset if self.position.offset < self.position.size \
            else self.position.size

    def __iter__(self) -> Iterator[int]:
        pos = self.position
        if pos.offset >= pos.size:
            pos.epoch, pos.offset = pos.epoch + 1, 0
        order = pos.order()
        while pos.offset < pos.size:
            index = int(order[pos.offset])
            pos.offset += 1
            yield index
