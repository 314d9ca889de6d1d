"""Torch state dicts <-> the checkpoint serialiser's storable values, and loading into a target.

``to_storable(state_dict)`` turns a nested PyTorch state dict into values the safe serialiser
stores (:mod:`fleet.checkpoint.codec`): every tensor becomes a marker dict
``{"$tensor": <numpy array>, "dtype": "bfloat16"}`` (dtypes numpy lacks, such as ``bfloat16`` or
the float8 types, are stored bit for bit as integers of the same width); any object with
``state_dict()``/``load_state_dict()`` (module, optimizer, LR scheduler, ``GradScaler``, a user's
own stateful class) is replaced by its state dict; a ``torch.Generator`` is stored as its state
(``load_into`` sets it back into the target's generator). Any other torch object is refused with
its path. Other values pass through unchanged (the
serialiser names the path of anything it cannot store). Nothing is pickled, so loading never runs
code.

``from_storable(tree)`` turns the markers back into tensors (sharing the downloaded buffer, on
``map_location``). ``load_into(target, tree)`` fills ``target`` in place, the way
``torch.distributed.checkpoint.load`` does: tensors are ``copy_``-ed into (keeping their device
and dtype), stateful objects get ``load_state_dict``, other values are replaced in the target
dict. Every key of the target must be in the checkpoint; keys only the checkpoint has are left
out of the target.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, MutableMapping
from typing import Any

import numpy as np
import torch

from fleet.checkpoint.codec import HostCopy
from fleet.checkpoint.errors import CheckpointError, UnsupportedStateError

TENSOR = "$tensor"
GENERATOR = "$generator"  # a torch.Generator: its get_state() bytes and device
# same-width integer views for dtypes numpy has no equivalent of (stored bit for bit)
_CARRIERS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_NUMPY_DTYPES = {
    torch.float16,
    torch.float32,
    torch.float64,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
    torch.complex64,
    torch.complex128,
}


def is_stateful(obj: Any) -> bool:
    """Whether ``obj`` saves and loads through ``state_dict()`` / ``load_state_dict()``."""
    return (
        not isinstance(obj, (torch.Tensor, Mapping, type))
        and callable(getattr(obj, "state_dict", None))
        and callable(getattr(obj, "load_state_dict", None))
    )


def to_storable(value: Any, path: str = "state") -> Any:
    """A snapshot-ready copy of ``value``'s structure with tensors as marker dicts (no data copy
    for contiguous CPU tensors: the serialiser's snapshot is the copy; tensors on another device
    become a :func:`host_copy`, copied once, when the bytes are taken)."""
    if isinstance(value, torch.Tensor):
        return _tensor(value, path)
    if is_stateful(value):
        return to_storable(value.state_dict(), path)
    if isinstance(value, Mapping):
        return {k: to_storable(v, f"{path}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list):
        return [to_storable(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, tuple) and type(value) in (tuple, torch.Size):
        return tuple(to_storable(v, f"{path}[{i}]") for i, v in enumerate(value))
    if isinstance(value, torch.Generator):
        return {GENERATOR: value.get_state().numpy(), "device": str(value.device)}
    if type(value).__module__.split(".")[0] == "torch":
        raise UnsupportedStateError(
            f"{path}: fleet.checkpoint.torch cannot store a {type(value).__module__}."
            f"{type(value).__qualname__}; put its state (tensors or plain values) in "
            "the state dict instead"
        )
    return value


def _tensor(t: torch.Tensor, path: str) -> dict[str, Any]:
    if t.layout != torch.strided or t.is_quantized:
        raise UnsupportedStateError(
            f"{path}: cannot store a {t.layout} / quantized tensor; convert it to a dense one (tensor.to_dense())"
        )
    data = t.detach()
    if data.dtype not in _NUMPY_DTYPES:
        carrier = _CARRIERS.get(data.element_size())
        if carrier is None:
            raise UnsupportedStateError(f"{path}: cannot store a tensor of dtype {t.dtype}")
        data = data.view(carrier)
    stored = host_copy(data) if _fork_cannot_read(data) else data.contiguous().numpy()
    return {TENSOR: stored, "dtype": str(t.dtype).removeprefix("torch.")}


def _fork_cannot_read(t: torch.Tensor) -> bool:
    """Whether ``t``'s memory is out of a forked child's reach: on a device, or page-locked host
    memory (CUDA maps it so that a child does not inherit it). Pinned memory needs CUDA to be
    initialised, so asking costs nothing (and starts nothing) in a process without it."""
    if t.device.type != "cpu":
        return True
    return bool(torch.cuda.is_available() and torch.cuda.is_initialized() and t.is_pinned())


def host_copy(t: torch.Tensor) -> HostCopy:
    """``t`` (of a dtype numpy has; on a GPU or in pinned memory) as a
    :class:`~fleet.checkpoint.codec.HostCopy`, which makes ``save_async`` take the copy snapshot:
    it copies ``t`` from its device straight into the snapshot buffer (one copy, not ``.cpu()`` and
    then the snapshot's copy); a synchronous save takes ``.cpu()``. The snapshot buffer is
    pageable memory, so the copy is synchronous (``non_blocking`` would gain nothing)."""
    dtype = torch.empty(0, dtype=t.dtype).numpy().dtype

    def fill(out: np.ndarray) -> None:
        with torch.no_grad():
            torch.from_numpy(out).view(t.dtype).view(t.shape).copy_(t)

    return HostCopy(dtype, tuple(t.shape), fill, lambda: t.cpu().contiguous().numpy())


def _is_marker(value: Any) -> bool:
    return isinstance(value, dict) and TENSOR in value and "dtype" in value


def _untensor(marker: Mapping[str, Any], map_location: Any, path: str, placed: Placement | None = None) -> torch.Tensor:
    dtype = getattr(torch, str(marker["dtype"]), None)
    if not isinstance(dtype, torch.dtype):
        raise CheckpointError(f"{path}: the checkpoint holds a tensor of unknown dtype {marker['dtype']!r}")
    own = placed.tensor_for(marker[TENSOR]) if placed is not None else None
    if own is not None:  # read straight into the target: it is the tensor
        return own if map_location is None else own.to(map_location)
    t = torch.from_numpy(marker[TENSOR])
    if t.dtype != dtype:
        t = t.view(dtype)
    return t if map_location is None else t.to(map_location)


def _is_generator(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {GENERATOR, "device"}


def _generator(value: Mapping[str, Any], path: str, into: torch.Generator | None = None) -> torch.Generator:
    """A generator with the stored state (``into`` when given)."""
    try:
        gen = into if into is not None else torch.Generator(device=str(value["device"]))
        gen.set_state(torch.from_numpy(np.array(value[GENERATOR], dtype=np.uint8)))
    except (RuntimeError, TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: cannot restore the torch.Generator state: {err}") from err
    return gen


def from_storable(value: Any, map_location: Any = "cpu", path: str = "state", placed: Placement | None = None) -> Any:
    """The inverse of :func:`to_storable` (stateful objects come back as their state dicts).
    Tensors that ``placed`` read straight into a load target come back as that target tensor."""
    if _is_marker(value):
        return _untensor(value, map_location, path, placed)
    if _is_generator(value):
        return _generator(value, path)
    if isinstance(value, dict):
        return {k: from_storable(v, map_location, f"{path}[{k!r}]", placed) for k, v in value.items()}
    if isinstance(value, list):
        return [from_storable(v, map_location, f"{path}[{i}]", placed) for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return tuple(from_storable(v, map_location, f"{path}[{i}]", placed) for i, v in enumerate(value))
    return value


def load_into(
    target: MutableMapping[str, Any],
    tree: Mapping[str, Any],
    map_location: Any = "cpu",
    path: str = "state",
    placed: Placement | None = None,
) -> None:
    """Fill ``target`` in place from the stored ``tree`` (see the module docstring).

    Raises :class:`CheckpointError` naming the path of a key the checkpoint lacks or a tensor
    whose shape differs.
    """
    if not isinstance(tree, Mapping):
        raise CheckpointError(f"{path}: the checkpoint holds {type(tree).__name__}, not a dict")
    for key, current in list(target.items()):
        where = f"{path}[{key!r}]"
        if key not in tree:
            raise CheckpointError(f"{where}: not in the checkpoint (it has {sorted(map(str, tree))})")
        stored = tree[key]
        if isinstance(current, torch.Tensor):
            loaded = from_storable(stored, None, where, placed)
            if not isinstance(loaded, torch.Tensor) or loaded.shape != current.shape:
                got = tuple(loaded.shape) if isinstance(loaded, torch.Tensor) else type(loaded).__name__
                raise CheckpointError(
                    f"{where}: the checkpoint holds {got}, the target a tensor of shape {tuple(current.shape)}"
                )
            if loaded is not current:
                with torch.no_grad():
                    current.copy_(loaded)
        elif isinstance(current, torch.Generator) and _is_generator(stored):
            _generator(stored, where, into=current)
        elif is_stateful(current):
            current.load_state_dict(from_storable(stored, map_location, where, placed))
        elif isinstance(current, MutableMapping) and isinstance(stored, Mapping) and not _is_marker(stored):
            load_into(current, stored, map_location, where, placed)
        else:
            target[key] = from_storable(stored, map_location, where, placed)


class Placement:
    """Where a load into ``target`` puts each blob of a checkpoint: straight into the target's own
    tensor when one sits at the blob's path with the same dtype, shape and size (a contiguous CPU
    tensor; a stateful object's ``state_dict()`` tensors count, which share the module's
    parameters), else into a fresh buffer. Called with the checkpoint's
    :class:`~fleet.checkpoint.codec.Layout` by :meth:`CheckpointManager.load`; then
    :func:`from_storable`/:func:`load_into` return those target tensors instead of copying.

    Two targets that share memory (tied weights) never both receive bytes: the second gets a
    fresh buffer and is copied as before, so a blob's bytes stay as read until they are hashed.
    """

    def __init__(self, target: Mapping[str, Any]):
        self.target = target
        self._by_ptr: dict[int, torch.Tensor] = {}

    def __call__(self, layout: Any) -> list[Any]:
        self._by_ptr.clear()
        blobs: list[Any] = [None] * len(layout.spans)
        self._walk(layout.tree, self.target, blobs, layout.spans, [])
        return [b if b is not None else np.empty(n, np.uint8) for b, (_, n) in zip(blobs, layout.spans)]

    def tensor_for(self, array: Any) -> torch.Tensor | None:
        """The target tensor ``array`` (a decoded blob) was read into, if it was."""
        if not isinstance(array, np.ndarray) or not array.nbytes:
            return None
        own = self._by_ptr.get(array.ctypes.data)
        return own if own is not None and own.numel() * own.element_size() == array.nbytes else None

    def _walk(self, node: Any, target: Any, blobs: list[Any], spans: Any, taken: list[tuple[int, int]]) -> None:
        if is_stateful(target):
            target = target.state_dict()
        pairs = _pairs(node)
        if isinstance(target, torch.Tensor):
            if pairs is not None and set(pairs) == {TENSOR, "dtype"}:
                self._place(pairs, target, blobs, spans, taken)
            return
        if isinstance(target, Mapping) and pairs is not None:
            for key, value in target.items():
                if key in pairs:
                    self._walk(pairs[key], value, blobs, spans, taken)
        elif isinstance(target, (list, tuple)):
            items = node.get("$tuple") if isinstance(node, dict) else node
            if isinstance(items, list) and len(items) == len(target):
                for sub, value in zip(items, target):
                    self._walk(sub, value, blobs, spans, taken)

    def _place(
        self, marker: dict[Any, Any], t: torch.Tensor, blobs: list[Any], spans: Any, taken: list[tuple[int, int]]
    ) -> None:
        arr = marker[TENSOR]
        if not isinstance(arr, dict) or not isinstance(arr.get("$array"), int) or "scalar" in arr:
            return
        index, nbytes = arr["$array"], t.numel() * t.element_size()
        if not (0 <= index < len(blobs)) or blobs[index] is not None or spans[index][1] != nbytes or not nbytes:
            return
        if (
            t.device.type != "cpu"
            or not t.is_contiguous()
            or t.is_conj()
            or t.is_neg()
            or str(t.dtype).removeprefix("torch.") != marker["dtype"]
            or list(t.shape) != arr.get("shape")
        ):
            return
        lo = t.data_ptr()
        at = bisect.bisect_left(taken, (lo, lo))
        if (at < len(taken) and taken[at][0] < lo + nbytes) or (at and taken[at - 1][1] > lo):
            return  # shares memory with a tensor placed already
        taken.insert(at, (lo, lo + nbytes))
        blobs[index] = t.detach().reshape(-1).view(torch.uint8).numpy()
        self._by_ptr[lo] = t


def _pairs(node: Any) -> dict[Any, Any] | None:
    """A header node of a dict as {key: node}, keys of plain scalars only; None for anything else."""
    if not isinstance(node, dict):
        return None
    if "$map" in node:
        raw = node["$map"]
        if not isinstance(raw, list):
            return None
        return {
            k: v
            for k, v in (p for p in raw if isinstance(p, list) and len(p) == 2)
            if isinstance(k, (str, int, float, bool)) or k is None
        }
    if any(k.startswith("$") for k in node):
        return None
    return node
