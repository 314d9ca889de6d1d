"""Torch state dicts <-> the checkpoint serialiser's storable values, and loading into a target.

``to_storable(state_dict)`` turns a nested PyTorch state dict into values the safe serialiser
stores (:mod:`fleet.checkpoint.codec`): every tensor becomes a marker dict
``{"$tensor": <numpy array>, "dtype": "bfloat16"}`` (dtypes numpy lacks, such as ``bfloat16`` or
the float8 types, are stored bit for bit as integers of the same width); any object with
``state_dict()``/``load_state_dict()`` (module, optimizer, LR scheduler, ``GradScaler``, a user's
own stateful class) is replaced by its state dict. Other values pass through unchanged (the
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

from collections.abc import Mapping, MutableMapping
from typing import Any

import torch

from fleet.checkpoint.errors import CheckpointError, UnsupportedStateError

TENSOR = "$tensor"
# same-width integer views for dtypes numpy has no equivalent of (stored bit for bit)
_CARRIERS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_NUMPY_DTYPES = {torch.float16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32,
                 torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128}


def is_stateful(obj: Any) -> bool:
    """Whether ``obj`` saves and loads through ``state_dict()`` / ``load_state_dict()``."""
    return not isinstance(obj, (torch.Tensor, Mapping, type)) and callable(getattr(obj, "state_dict", None)) \
        and callable(getattr(obj, "load_state_dict", None))


def to_storable(value: Any, path: str = "state") -> Any:
    """A snapshot-ready copy of ``value``'s structure with tensors as marker dicts (no data copy
    for contiguous CPU tensors: the serialiser's snapshot is the copy)."""
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
    return value


def _tensor(t: torch.Tensor, path: str) -> dict[str, Any]:
    if t.layout != torch.strided or t.is_quantized:
        raise UnsupportedStateError(f"{path}: cannot store a {t.layout} / quantized tensor; "
                                    "convert it to a dense one (tensor.to_dense())")
    data = t.detach().cpu().contiguous()
    if data.dtype not in _NUMPY_DTYPES:
        carrier = _CARRIERS.get(data.element_size())
        if carrier is None:
            raise UnsupportedStateError(f"{path}: cannot store a tensor of dtype {t.dtype}")
        data = data.view(carrier)
    return {TENSOR: data.numpy(), "dtype": str(t.dtype).removeprefix("torch.")}


def _is_marker(value: Any) -> bool:
    return isinstance(value, dict) and TENSOR in value and "dtype" in value


def _untensor(marker: Mapping[str, Any], map_location: Any, path: str) -> torch.Tensor:
    dtype = getattr(torch, str(marker["dtype"]), None)
    if not isinstance(dtype, torch.dtype):
        raise CheckpointError(f"{path}: the checkpoint holds a tensor of unknown dtype {marker['dtype']!r}")
    t = torch.from_numpy(marker[TENSOR])
    if t.dtype != dtype:
        t = t.view(dtype)
    return t if map_location is None else t.to(map_location)


def from_storable(value: Any, map_location: Any = "cpu", path: str = "state") -> Any:
    """The inverse of :func:`to_storable` (stateful objects come back as their state dicts)."""
    if _is_marker(value):
        return _untensor(value, map_location, path)
    if isinstance(value, dict):
        return {k: from_storable(v, map_location, f"{path}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list):
        return [from_storable(v, map_location, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return tuple(from_storable(v, map_location, f"{path}[{i}]") for i, v in enumerate(value))
    return value


def load_into(target: MutableMapping[str, Any], tree: Mapping[str, Any], map_location: Any = "cpu",
              path: str = "state") -> None:
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
            loaded = from_storable(stored, None, where)
            if not isinstance(loaded, torch.Tensor) or loaded.shape != current.shape:
                got = tuple(loaded.shape) if isinstance(loaded, torch.Tensor) else type(loaded).__name__
                raise CheckpointError(f"{where}: the checkpoint holds {got}, the target a tensor of "
                                      f"shape {tuple(current.shape)}")
            with torch.no_grad():
                current.copy_(loaded)
        elif is_stateful(current):
            current.load_state_dict(from_storable(stored, map_location, where))
        elif isinstance(current, MutableMapping) and isinstance(stored, Mapping) and not _is_marker(stored):
            load_into(current, stored, map_location, where)
        else:
            target[key] = from_storable(stored, map_location, where)
