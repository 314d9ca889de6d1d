"""PyTorch Distributed Checkpoint (``torch.distributed.checkpoint``) storage on the checkpoint layout.

``StorageWriter`` / ``StorageReader`` so ``dcp.save`` and ``dcp.load`` use the same atomic,
keep-N locations as :class:`~fleet.checkpoint.CheckpointManager` (any store: directory, S3, GCS,
Azure)::

    import torch.distributed as dist
import torch.distributed.checkpoint as dcp
    from fleet.checkpoint import CheckpointManager
    from fleet.checkpoint.dcp import StorageReader, StorageWriter

    mgr = CheckpointManager("s3://bucket/run1", keep_last=3)
    dcp.save(state_dict, storage_writer=StorageWriter(mgr, step))       # every rank
    dcp.load(state_dict, storage_reader=StorageReader(mgr))              # newest valid, in place

How a save lands (the DCP protocol mapped onto the layout): the coordinator checks the step is not
below a newer valid checkpoint and hands every rank a token; each rank with items to write uploads
one object ``data/step-N-<token>-r<rank>.ckpt`` (its tensors' raw bytes, 64-byte aligned, and its
non-tensor values as DCP serialised them); after DCP has gathered every rank's results, the
coordinator uploads DCP's metadata as ``data/step-N-<token>-meta.ckpt`` and commits one manifest
listing the metadata first and every rank's object after it (each with size and checksum). A rank
that fails or dies before that leaves the step invisible; retention (``keep_last``, ``keep_every``,
``keep_best`` with ``metrics=``) is the manager's. DCP's planner de-duplicates replicated tensors,
so a rank may write nothing.

Loading picks the newest checkpoint whose metadata verifies (or ``step=``); in a job of several
ranks rank 0 chooses and broadcasts the step, so every rank reads the same one. Each object is
checksum verified before use. DCP reshards on load, so the world size may differ from the save's.

Trust: the metadata is read with ``torch.load(weights_only=True)`` and DCP's own metadata classes
allowed, but DCP's default load planner unpickles non-tensor values (``weights_only=False``), so
load DCP checkpoints only from locations you trust (:func:`fleet.checkpoint.torch.load` never runs
code from a checkpoint).
"""

from __future__ import annotations

import bisect
import dataclasses
import io
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed._shard._utils import narrow_tensor_by_index
from torch.distributed.checkpoint import metadata as dcp_metadata
from torch.distributed.checkpoint.planner import (
    LoadItemType,
    LoadPlan,
    LoadPlanner,
    SavePlan,
    SavePlanner,
    WriteItemType,
)
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from fleet.checkpoint import distributed
from fleet.checkpoint.errors import CheckpointError, CorruptCheckpointError
from fleet.checkpoint.layout import CheckpointInfo, Part
from fleet.checkpoint.manager import CheckpointManager
from fleet.checkpoint.payload import Payload

_ALIGN = 64
log = logging.getLogger("fleet.checkpoint")
_SAFE_METADATA = [
    dcp_metadata.Metadata,
    dcp_metadata.MetadataIndex,
    dcp_metadata.TensorStorageMetadata,
    dcp_metadata.ChunkStorageMetadata,
    dcp_metadata.BytesStorageMetadata,
    dcp_metadata.TensorProperties,
    dcp_metadata.StorageMeta,
    dcp_metadata._MEM_FORMAT_ENCODING,
]


def _done(value: Any) -> Future:
    fut: Future = Future()
    fut.set_result(value)
    return fut


class StorageWriter(dcp.StorageWriter):
    """Writes one ``dcp.save`` as checkpoint ``step`` of ``mgr``'s location (see the module doc).

    ``info`` holds the committed checkpoint on the coordinator after ``dcp.save`` returns.
    """

    def __init__(self, mgr: CheckpointManager, step: int, *, metrics: Mapping[str, float] | None = None):
        super().__init__()
        self.mgr, self.metrics = mgr, dict(metrics or {})
        self.step = int(step)  # checked (and refused when stale) by the coordinator
        self.token = ""
        self.info: CheckpointInfo | None = None

    def reset(self, checkpoint_id: Any = None) -> None:
        self.token, self.info = "", None

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.is_coordinator = is_coordinator

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        return plan

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        self.token = distributed.fresh_token(self.mgr, self.step)  # coordinator: refuse before anyone writes
        return [dataclasses.replace(p, storage_data=f"{self.token}-r{rank}") for rank, p in enumerate(plans)]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future:
        if not plan.items:
            return _done([])
        chunks: list[Any] = []
        placed: list[tuple[Any, int, int, str, list[int]]] = []
        pos = 0
        for item in plan.items:
            data = planner.resolve_data(item)
            if item.type == WriteItemType.BYTE_IO:
                raw, dtype, shape = memoryview(data.getbuffer()).cast("B"), "", []
            else:
                tensor = data.detach().cpu().contiguous()
                raw = memoryview(tensor.reshape(-1).view(torch.uint8).numpy()).cast("B")
                dtype, shape = str(tensor.dtype).removeprefix("torch."), list(tensor.shape)
            pad = -pos % _ALIGN
            if pad:
                chunks.append(bytes(pad))
                pos += pad
            chunks.append(raw)
            placed.append((item.index, pos, raw.nbytes, dtype, shape))
            pos += raw.nbytes
        part = self.mgr.upload_part(Payload.of(chunks), self.step, str(plan.storage_data))
        return _done(
            [
                WriteResult(index=index, size_in_bytes=n, storage_data=(part, offset, n, dtype, shape))
                for index, offset, n, dtype, shape in placed
            ]
        )

    def finish(self, metadata: dcp_metadata.Metadata, results: list[list[WriteResult]]) -> None:
        parts: list[Part] = []
        slot: dict[str, int] = {}
        storage: dict[Any, tuple[int, int, int, str, list[int]]] = {}
        for rank_results in results:
            for wr in rank_results:
                part, offset, n, dtype, shape = wr.storage_data
                if part.key not in slot:
                    parts.append(part)
                    slot[part.key] = len(parts)  # object 0 is the metadata
                storage[wr.index] = (slot[part.key], offset, n, dtype, shape)
        metadata.storage_data = storage
        metadata.storage_meta = dcp_metadata.StorageMeta(
            checkpoint_id=f"{self.mgr.uri}#{self.step}", save_id=self.token
        )
        buf = io.BytesIO()
        torch.save(metadata, buf)
        meta = self.mgr.upload_part(Payload.of([buf.getbuffer()]), self.step, f"{self.token}-meta")
        self.info = self.mgr.commit_parts(self.step, [meta, *parts], metrics=self.metrics)

    def storage_meta(self) -> dcp_metadata.StorageMeta | None:
        return None

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Any) -> bool:
        return False  # chosen explicitly, never by a checkpoint_id


class StorageReader(dcp.StorageReader):
    """Reads the newest valid DCP checkpoint of ``mgr``'s location, or ``step`` (see the module doc).

    ``info`` holds the checkpoint read once ``dcp.load`` has started. ``group`` is the process
    group used to agree on the step (default: the default group, when one is initialised).
    ``before`` considers only steps below it (what :func:`load` uses to fall back). Data is read
    straight into the target tensors where a stored tensor matches one whole (same dtype and
    size, contiguous on the CPU), checksum verified on the way; a corrupt object raises
    :class:`CorruptCheckpointError` after its bytes may have reached the target.
    """

    def __init__(
        self, mgr: CheckpointManager, *, step: int | None = None, group: Any = None, before: int | None = None
    ):
        super().__init__()
        self.mgr, self.step, self.group, self.before = mgr, step, group, before
        self.info: CheckpointInfo | None = None
        self.nothing = False  # read_metadata found no checkpoint to read (every rank)
        self.storage_data: dict[Any, Any] = {}

    def reset(self, checkpoint_id: Any = None) -> None:
        self.storage_data = {}

    def read_metadata(self, *args: Any, **options: Any) -> dcp_metadata.Metadata:
        # (no parameter named "kwargs": DCP would then retry a failed read per rank, out of step)
        if distributed.active(self.group):
            rank0 = dist.get_rank(self.group) == 0
            chosen, err = distributed.outcome(self._choose) if rank0 else (None, None)
            step, self.nothing = distributed.broadcast(
                (chosen[0].step if chosen is not None else None, isinstance(err, NoCheckpointError)), self.group
            )
            if err is not None:
                raise err
            if step is None:
                raise CheckpointError(f"{self.mgr.uri}: rank 0 could not read a DCP checkpoint")
            self.info, metadata = chosen if rank0 else self._read(self._info(step))
        else:
            try:
                self.info, metadata = self._choose()
            except NoCheckpointError:
                self.nothing = True
                raise
        return metadata

    def _info(self, step: int) -> CheckpointInfo:
        info = next((i for i in self.mgr.intact() if i.step == step), None)
        if info is None:
            raise CheckpointError(f"{self.mgr.uri}: no intact checkpoint at step {step}")
        return info

    def _choose(self) -> tuple[CheckpointInfo, dcp_metadata.Metadata]:
        if self.step is not None:
            return self._read(self._info(self.step))
        for info in self.mgr.intact():
            if self.before is not None and info.step >= self.before:
                continue
            try:
                return self._read(info)
            except CorruptCheckpointError as err:
                log.warning(
                    "%s: skipping step %d: %s; falling back to an older checkpoint", self.mgr.uri, info.step, err
                )
        below = f" below step {self.before}" if self.before is not None else ""
        raise NoCheckpointError(f"{self.mgr.uri}: no valid DCP checkpoint to load{below}")

    def _read(self, info: CheckpointInfo) -> tuple[CheckpointInfo, dcp_metadata.Metadata]:
        raw = self.mgr.fetch_part(info, 0)
        try:
            with torch.serialization.safe_globals(_SAFE_METADATA):
                metadata = torch.load(io.BytesIO(raw), weights_only=True)
        except Exception as err:
            raise CorruptCheckpointError(
                f"step {info.step} holds no DCP metadata ({type(err).__name__}: {str(err)[:200]})"
            ) from err
        if not isinstance(metadata, dcp_metadata.Metadata):
            raise CorruptCheckpointError(f"step {info.step} holds no DCP metadata")
        return info, metadata

    def set_up_storage_reader(
        self, metadata: dcp_metadata.Metadata, is_coordinator: bool, *args: Any, **kwargs: Any
    ) -> None:
        self.storage_data = metadata.storage_data

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future:
        assert self.info is not None, "read_metadata runs first"
        by_object: dict[int, dict[Any, list[Any]]] = {}
        for req in plan.items:
            item = self.storage_data[req.storage_index][0]
            by_object.setdefault(item, {}).setdefault(req.storage_index, []).append(req)
        taken: list[tuple[int, int]] = []
        for index, items in sorted(by_object.items()):
            direct: list[Any] = []  # (req, target) read straight into the target
            staged: list[tuple[Any, np.ndarray]] = []  # (requests of one item, its bytes)
            regions: list[tuple[int, Any]] = []
            for storage_index, reqs in items.items():
                _, offset, n, dtype, shape = self.storage_data[storage_index]
                target = _whole_target(reqs, planner, n, dtype, shape, taken)
                if target is not None:
                    direct.append((reqs[0], target))
                    regions.append((offset, target.reshape(-1).view(torch.uint8).numpy()))
                else:
                    buf = np.empty(n, np.uint8)
                    staged.append((reqs, buf))
                    regions.append((offset, buf))
            regions.sort(key=lambda r: r[0])
            self.mgr.fetch_placed(self.info, index, regions)
            for req, target in direct:
                planner.commit_tensor(req, target)
            for reqs, buf in staged:
                _, offset, n, dtype, shape = self.storage_data[reqs[0].storage_index]
                for req in reqs:
                    if req.type == LoadItemType.BYTE_IO:
                        planner.load_bytes(req, io.BytesIO(buf.tobytes()))
                        continue
                    tensor = _tensor(buf, 0, n, dtype, shape)
                    tensor = narrow_tensor_by_index(tensor, req.storage_offsets, req.lengths)
                    target = planner.resolve_tensor(req).detach()
                    if target.size() != tensor.size():
                        raise CheckpointError(
                            f"{req.storage_index.fqn}: the checkpoint holds {tuple(tensor.shape)}, "
                            f"the target {tuple(target.shape)}"
                        )
                    target.copy_(tensor)
                    planner.commit_tensor(req, target)
        return _done(None)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Any) -> bool:
        return False


def _whole_target(
    reqs: list[Any], planner: LoadPlanner, n: int, dtype: str, shape: list[int], taken: list[tuple[int, int]]
) -> torch.Tensor | None:
    """The target tensor one stored tensor can be read straight into: a single request for the
    whole of it, into a contiguous CPU tensor of the same dtype and size that shares no memory
    with another such target; None otherwise (the bytes are staged and copied)."""
    req = reqs[0]
    if len(reqs) != 1 or req.type == LoadItemType.BYTE_IO or not n:
        return None
    if any(req.storage_offsets) or list(req.lengths) != list(shape):
        return None
    target = planner.resolve_tensor(req).detach()
    if (
        target.device.type != "cpu"
        or not target.is_contiguous()
        or target.is_conj()
        or target.is_neg()
        or str(target.dtype).removeprefix("torch.") != dtype
        or list(target.shape) != list(shape)
        or target.numel() * target.element_size() != n
    ):
        return None
    lo = target.data_ptr()
    at = bisect.bisect_left(taken, (lo, lo))
    if (at < len(taken) and taken[at][0] < lo + n) or (at and taken[at - 1][1] > lo):
        return None
    taken.insert(at, (lo, lo + n))
    return target


class NoCheckpointError(CheckpointError):
    """The location holds no DCP checkpoint that can be read (below the step asked for)."""


def load(
    state_dict: dict[str, Any],
    mgr: CheckpointManager,
    *,
    step: int | None = None,
    group: Any = None,
    planner: LoadPlanner | None = None,
) -> CheckpointInfo | None:
    """``dcp.load`` of the newest DCP checkpoint that verifies, into ``state_dict`` in place.

    Like :meth:`CheckpointManager.load_latest`: a checkpoint any of whose objects is missing or
    fails its checksum on any rank is skipped (every rank sees the failure, so all fall back
    together) and the next older one is loaded over whatever reached the target. Returns the
    checkpoint loaded, or None when the location holds none (``state_dict`` untouched). With
    ``step`` only that step is tried; its corruption raises. A collective call in a job of
    several ranks; other failures raise DCP's ``CheckpointException`` as ``dcp.load`` does.
    """
    before: int | None = None
    while True:
        reader = StorageReader(mgr, step=step, group=group, before=before)
        try:
            dcp.load(state_dict, storage_reader=reader, planner=planner, process_group=group)
            return reader.info
        except dcp.CheckpointException as err:
            causes = [exc for exc, _trace in err.failures.values()]
            if reader.nothing and step is None:
                if before is None:
                    return None
                raise CheckpointError(f"{mgr.uri}: no DCP checkpoint below step {before} verifies") from err
            if (
                step is not None
                or reader.info is None
                or not causes
                or not all(isinstance(c, CorruptCheckpointError) for c in causes)
            ):
                raise
            log.warning(
                "%s: step %d of this DCP checkpoint location is corrupt (%s); loading an older one",
                mgr.uri,
                reader.info.step,
                causes[0],
            )
            before = reader.info.step


def _tensor(buf: Any, offset: int, n: int, dtype: str, shape: list[int]) -> torch.Tensor:
    kind = getattr(torch, dtype, None)
    if not isinstance(kind, torch.dtype):
        raise CorruptCheckpointError(f"unknown tensor dtype {dtype!r} in DCP metadata")
    if n == 0:
        return torch.empty(shape, dtype=kind)
    return torch.frombuffer(buf, dtype=torch.uint8, count=n, offset=offset).view(kind).reshape(shape)
