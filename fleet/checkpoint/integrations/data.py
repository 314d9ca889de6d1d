"""The position in the data, exact with worker processes and across ranks (``spotfleet[data]``).

**Loaders with workers.** A plain ``DataLoader`` with ``num_workers > 0`` prefetches, so a sampler
that counts what it handed out runs ahead of what the loop used (two workers had handed out 224
samples when the loop had used 96). torchdata's ``StatefulDataLoader`` counts what it *yielded*
and snapshots its workers; it has ``state_dict``/``load_state_dict``, so
:func:`fleet.checkpoint.torch.save` stores it like a module::

    from torchdata.stateful_dataloader import StatefulDataLoader
    from fleet.checkpoint.torch import load, save

    loader = StatefulDataLoader(ds, batch_size=32, shuffle=True, num_workers=2)
    sd = {"model": model, "optimizer": opt, "loader": loader, "step": 0}
    load(mgr, sd)              # the loader continues at the first batch the loop has not seen
    ...
    save(mgr, sd, step)

**Ranks.** :class:`ElasticSampler` is a ``DistributedSampler`` whose position belongs to the job,
not to a rank: ``state_dict()`` holds the epoch and how many samples of the epoch's global order
all ranks together consumed, and ``load_state_dict`` continues from there at any world size, so an
elastic job that shrank or grew neither repeats nor skips a sample. The loop reports what it
consumed with ``advance(n)`` (per rank, the same on every rank in synchronous data parallelism);
every rank then holds the same state, so saving it from any rank (or all) is right. Use it in a
plain ``DataLoader`` (any ``num_workers``: the position is what ``advance`` reported, never what
was prefetched), not inside a ``StatefulDataLoader``, which snapshots a sampler's state on its own
schedule and restores that copy instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

try:
    import torch
    from torch.utils.data import Dataset, DistributedSampler
except ImportError as _err:  # pragma: no cover - exercised only where torch is absent
    raise ImportError("fleet.checkpoint.integrations.data needs PyTorch: pip install 'spotfleet[data]'") from _err


class ElasticSampler(DistributedSampler):
    """``DistributedSampler`` (same order per ``seed`` and epoch, same padding or ``drop_last``)
    that resumes mid-epoch at the job's position, for any number of replicas (see the module doc).

    A resumed iteration stripes the rest of the epoch's order over the current replicas; its
    padding (``drop_last=False``) repeats samples from the rest's start, as ``DistributedSampler``
    pads a whole epoch.
    """

    def __init__(
        self,
        dataset: Dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ):
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last)
        self.start = 0  # global samples of this epoch consumed before the current iteration
        self.consumed = 0  # samples this rank consumed since (``advance``)

    @property
    def size(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    @property
    def position(self) -> int:
        """Samples of the current epoch's global order consumed by all ranks together."""
        return min(self.size, self.start + self.consumed * self.num_replicas)

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.start = self.consumed = 0
        super().set_epoch(epoch)

    def advance(self, samples: int) -> None:
        """This rank consumed ``samples`` more (a batch's size, after the step that used it)."""
        if samples < 0:
            raise ValueError(f"advance() takes the samples consumed, >= 0; got {samples!r}")
        self.consumed += samples

    def order(self) -> list[int]:
        """The epoch's global order (``DistributedSampler``'s: ``randperm`` seeded ``seed + epoch``)."""
        if not self.shuffle:
            return list(range(self.size))
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.size, generator=g).tolist()

    def _rest(self) -> list[int]:
        rest = self.order()[self.position :]
        if self.drop_last:
            return rest[: len(rest) - len(rest) % self.num_replicas]
        pad = -len(rest) % self.num_replicas
        return rest + (rest * math.ceil(pad / len(rest)))[:pad] if rest and pad else rest

    def __iter__(self) -> Iterator[int]:
        rest = self._rest()
        self.start, self.consumed = self.position, 0
        return iter(rest[self.rank :: self.num_replicas])

    def __len__(self) -> int:
        return len(self._rest()) // self.num_replicas

    def state_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "epoch": self.epoch,
            "position": self.position,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue at a saved position; raises ValueError when the dataset or the order changed."""
        for key in ("size", "seed", "shuffle"):
            if state[key] != getattr(self, key):
                raise ValueError(
                    f"the sampler position was saved with {key}={state[key]!r}, "
                    f"this run has {key}={getattr(self, key)!r}"
                )
        self.epoch, self.start, self.consumed = int(state["epoch"]), int(state["position"]), 0
