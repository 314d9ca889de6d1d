"""Full training state beyond the weights: RNG states and the position in the data.

``capture_rng()`` / ``restore_rng()`` cover Python's ``random``, numpy's global RNG, any numpy
``Generator`` you name, and PyTorch's CPU and CUDA generators when torch is already imported
(this module never imports torch itself unless a checkpoint holds torch RNG state to restore).

``DataPosition`` is a resumable shuffled sampler: the order of epoch ``e`` is a pure function
of ``(seed, e)``, so storing ``(epoch, offset)`` is enough to continue with exactly the batch that
would have come next, neither repeating nor skipping samples.
"""

from __future__ import annotations

import importlib
import random
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def capture_rng(generators: Mapping[str, np.random.Generator] | None = None) -> dict[str, Any]:
    """Snapshot every RNG state (storable by the checkpoint serialiser)."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "generators": {name: g.bit_generator.state for name, g in (generators or {}).items()},
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        state["torch"] = torch.get_rng_state().numpy().copy()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["torch_cuda"] = [s.numpy().copy() for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng(state: Mapping[str, Any], generators: Mapping[str, np.random.Generator] | None = None) -> None:
    """Put back what :func:`capture_rng` took; named generators must match the captured names."""
    random.setstate(_as_tuple(state["python"]))
    np.random.set_state(state["numpy"])
    saved = state.get("generators", {})
    for name, gen in (generators or {}).items():
        if name not in saved:
            raise KeyError(f"the checkpoint has no state for RNG generator {name!r} (it has {sorted(saved) or 'none'})")
        gen.bit_generator.state = saved[name]
    if "torch" in state:
        torch = importlib.import_module("torch")
        torch.set_rng_state(torch.from_numpy(np.array(state["torch"], dtype=np.uint8)))
        if "torch_cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([torch.from_numpy(np.array(s, dtype=np.uint8)) for s in state["torch_cuda"]])


def _as_tuple(value: Any) -> Any:
    """random.setstate wants tuples all the way down."""
    return tuple(_as_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value


@dataclass
class DataPosition:
    """Where a run is in its data: epoch, samples consumed in it, and the shuffle seed.

    ``next_batch()`` returns the indices of the next batch and advances; the last batch of an
    epoch may be short, after which the next epoch starts with a new permutation.
    """

    size: int
    batch_size: int
    seed: int = 0
    shuffle: bool = True
    epoch: int = 0
    offset: int = 0
    _order: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _order_epoch: int = field(default=-1, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.size < 1 or self.batch_size < 1:
            raise ValueError(f"DataPosition needs size >= 1 and batch_size >= 1, got {self.size}, {self.batch_size}")

    def order(self) -> np.ndarray:
        """The sample order of the current epoch."""
        if self._order_epoch != self.epoch:
            if self.shuffle:
                self._order = np.random.default_rng([self.seed, self.epoch]).permutation(self.size)
            else:
                self._order = np.arange(self.size)
            self._order_epoch = self.epoch
        assert self._order is not None
        return self._order

    def next_batch(self) -> np.ndarray:
        """Indices of the next batch; advances the position."""
        if self.offset >= self.size:
            self.epoch, self.offset = self.epoch + 1, 0
        batch = self.order()[self.offset : self.offset + self.batch_size]
        self.offset += len(batch)
        return batch

    def state_dict(self) -> dict[str, int | bool]:
        return {
            "size": self.size,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "epoch": self.epoch,
            "offset": self.offset,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a saved position; raises ValueError if the dataset or batching changed."""
        for key in ("size", "batch_size", "seed", "shuffle"):
            if state[key] != getattr(self, key):
                raise ValueError(
                    f"data position was saved with {key}={state[key]!r}, this run has {key}={getattr(self, key)!r}"
                )
        self.epoch, self.offset = int(state["epoch"]), int(state["offset"])
