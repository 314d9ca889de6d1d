"""A safe serialiser for checkpoint state: JSON structure plus raw array/bytes buffers.

Trust: decoding never runs code (no pickle). A checkpoint read from a bucket someone else can
write can at worst fail to decode or hold wrong numbers; it cannot execute anything. That is why
arbitrary Python objects are refused at save time instead of being pickled.

Storable values: ``None``, ``bool``, ``int``, ``float`` (NaN/inf included), ``str``, ``bytes``
(and ``bytearray``/``memoryview``, read back as ``bytes``), ``list``, ``tuple``, ``dict`` with any
storable keys, numpy arrays of any non-object dtype and numpy scalars. Arrays come back writable,
C-ordered, sharing the downloaded buffer (no extra copy).

An array a forked child cannot read (a GPU or pinned tensor) enters as a :class:`HostCopy`: its dtype and shape,
and how to copy its bytes into host memory. A snapshot (:func:`encode`) has it copy straight into
the snapshot buffer (one copy); views (:func:`encode_views`) take a fresh host copy.

Layout: ``MAGIC`` | 8-byte little-endian header length | header JSON | blobs, each blob starting
at a 64-byte aligned offset from the start of the blob area.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib import format as npformat

from fleet.checkpoint.errors import CorruptCheckpointError, UnsupportedStateError
from fleet.checkpoint.payload import Payload

MAGIC = b"SPOTFLEET-CKPT\x00\x01"
ALIGN = 64
_HEADER_LEN = struct.Struct("<Q")


@dataclass(frozen=True)
class HostCopy:
    """An array a forked child cannot read (a GPU or pinned tensor): ``dtype`` and ``shape`` now, its bytes
    later: ``fill(out)`` copies them into ``out`` (a C-ordered writable uint8 array of
    ``nbytes``), ``host()`` returns them as a fresh C-ordered host array."""

    dtype: np.dtype
    shape: tuple[int, ...]
    fill: Callable[[np.ndarray], None]
    host: Callable[[], np.ndarray]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


Blob = np.ndarray | bytes | memoryview | HostCopy


class _Encoder:
    """Walks the state once: builds the JSON tree and collects the buffers (not yet copied)."""

    def __init__(self) -> None:
        self.blobs: list[Blob] = []

    def blob(self, data: Blob) -> int:
        self.blobs.append(data)
        return len(self.blobs) - 1

    def tree(self, value: Any, path: str) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, HostCopy):
            descr = npformat.dtype_to_descr(value.dtype)
            return {"$array": self.blob(value), "dtype": descr, "shape": list(value.shape)}
        if isinstance(value, np.ndarray) or isinstance(value, np.generic):
            arr = np.asarray(value)
            if arr.dtype.hasobject:
                raise UnsupportedStateError(
                    f"{path}: numpy arrays of Python objects cannot be stored; use a numeric dtype"
                )
            node = {"$array": self.blob(arr), "dtype": npformat.dtype_to_descr(arr.dtype), "shape": list(arr.shape)}
            if isinstance(value, np.generic):
                node["scalar"] = True
            return node
        if isinstance(value, (bytes, bytearray, memoryview)):
            return {"$bytes": self.blob(value if isinstance(value, bytes) else memoryview(value).cast("B"))}
        if isinstance(value, list):
            return [self.tree(v, f"{path}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, tuple):
            return {"$tuple": [self.tree(v, f"{path}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, dict):
            if all(isinstance(k, str) and not k.startswith("$") for k in value):
                return {k: self.tree(v, f"{path}[{k!r}]") for k, v in value.items()}
            return {
                "$map": [[self.tree(k, f"{path} key {k!r}"), self.tree(v, f"{path}[{k!r}]")] for k, v in value.items()]
            }
        hint = (
            " (use fleet.checkpoint.torch for tensors and modules)"
            if type(value).__module__.startswith("torch")
            else "; convert it to numpy arrays, bytes or plain Python values"
        )
        raise UnsupportedStateError(
            f"{path}: cannot store a value of type {type(value).__module__}.{type(value).__qualname__}{hint}"
        )


def _nbytes(blob: Blob) -> int:
    return blob.nbytes if isinstance(blob, (np.ndarray, memoryview, HostCopy)) else len(blob)


@dataclass(frozen=True)
class Encoded:
    """A state walked once (nothing copied yet): the header (padded to ``ALIGN``), each blob's
    ``[offset, size]`` in the blob area, and the blobs. :meth:`views` and :meth:`copy` give its
    bytes; ``off_host`` says whether any blob is a :class:`HostCopy`."""

    head: bytes
    offsets: list[list[int]]
    blobs: list[Blob]

    @property
    def size(self) -> int:
        return len(self.head) + (self.offsets[-1][0] + self.offsets[-1][1] if self.offsets else 0)

    @property
    def off_host(self) -> bool:
        return any(isinstance(b, HostCopy) for b in self.blobs)

    def views(self) -> Payload:
        """The bytes as views of the state's own buffers (see :func:`encode_views`)."""
        chunks: list[bytes | memoryview] = [self.head]
        end = 0
        for (off, n), data in zip(self.offsets, self.blobs):
            if off > end:
                chunks.append(bytes(off - end))
            chunks.append(_bytes_view(data))
            end = off + n
        return Payload.of(chunks)

    def copy(self, allocate: Callable[[int], np.ndarray] | None = None) -> Payload:
        """The bytes copied into one buffer from ``allocate`` (see :func:`encode`)."""
        head, total = self.head, self.size
        out = (allocate or _fresh)(total)[:total]
        out[: len(head)] = np.frombuffer(head, np.uint8)
        end = len(head)
        spans = []
        for (off, n), data in zip(self.offsets, self.blobs):
            start = len(head) + off
            out[end:start] = 0  # alignment padding
            spans.append((start, n, data))
            end = start + n
        _copy_blobs(out, spans)
        return Payload.of([memoryview(out)])


def walk(state: dict[str, Any]) -> Encoded:
    """Walk ``state`` once without copying its data; raises :class:`UnsupportedStateError`
    naming the path of the first value it cannot store."""
    if not isinstance(state, dict):
        raise UnsupportedStateError(f"state: expected a dict, got {type(state).__name__}")
    enc = _Encoder()
    tree = enc.tree(state, "state")
    offsets: list[list[int]] = []
    pos = 0
    for data in enc.blobs:
        pos += -pos % ALIGN
        offsets.append([pos, _nbytes(data)])
        pos += _nbytes(data)
    header = json.dumps({"version": 1, "tree": tree, "blobs": offsets}, separators=(",", ":")).encode()
    head = MAGIC + _HEADER_LEN.pack(len(header)) + header
    head += bytes(-len(head) % ALIGN)
    return Encoded(head, offsets, enc.blobs)


def encode(state: dict[str, Any], allocate: Callable[[int], np.ndarray] | None = None) -> Payload:
    """Snapshot ``state`` into a :class:`Payload` (one copy of the data; callers may mutate on).

    ``allocate(n)`` may supply the destination: a writable uint8 array of at least ``n`` bytes
    (reusing one across saves skips page-faulting fresh memory). Raises
    :class:`UnsupportedStateError` naming the path of the first value it cannot store.
    """
    return walk(state).copy(allocate)


def encode_views(state: dict[str, Any]) -> Payload:
    """The same bytes as :func:`encode`, as views of ``state``'s own buffers (no copy, no second
    copy of the state in memory): valid only while the caller leaves those arrays unchanged, as
    during a synchronous save. Same errors as :func:`encode`."""
    return walk(state).views()


def _bytes_view(data: Blob) -> memoryview:
    if isinstance(data, HostCopy):
        data = data.host()
    if isinstance(data, np.ndarray):
        arr = np.ascontiguousarray(data)
        return memoryview(arr.reshape(-1).view(np.uint8)) if arr.size else memoryview(b"")
    return memoryview(data).cast("B")


_SPLIT = 32 * 1024 * 1024
# threads of a snapshot copy: one per core this process may use, up to 8 (memory bandwidth is
# spent by then), at least 2
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
COPY_THREADS = max(2, min(8, _CORES))


def _copy_blobs(out: np.ndarray, spans: list[tuple[int, int, Any]]) -> None:
    """Copy every blob into ``out`` at its offset; large copies run on :data:`COPY_THREADS` threads
    (numpy releases the GIL while copying): this copy is all a background save blocks the caller for."""
    jobs: list[tuple[int, memoryview]] = []
    for start, n, data in spans:
        if not n:
            continue
        if isinstance(data, HostCopy):  # straight from the device into the buffer
            data.fill(out[start : start + n])
            continue
        src = _bytes_view(data)
        for lo in range(0, n, _SPLIT):
            jobs.append((start + lo, src[lo : lo + _SPLIT]))

    def copy(job: tuple[int, memoryview]) -> None:
        at, src = job
        out[at : at + src.nbytes] = np.frombuffer(src, np.uint8)

    if len(jobs) < 2:
        for job in jobs:
            copy(job)
        return
    with ThreadPoolExecutor(min(COPY_THREADS, len(jobs)), thread_name_prefix="checkpoint-snapshot") as pool:
        list(pool.map(copy, jobs))


def _fresh(n: int) -> np.ndarray:
    return np.empty(n, np.uint8)


def decode(buffer: bytes | bytearray | memoryview) -> dict[str, Any]:
    """Rebuild the state from ``buffer``; raises :class:`CorruptCheckpointError` on malformed input.

    Pass a ``bytearray`` to get writable arrays that share its memory.
    """
    view = memoryview(buffer).cast("B")
    if view[: len(MAGIC)].tobytes() != MAGIC:
        raise CorruptCheckpointError("not a spotfleet checkpoint (bad magic bytes)")
    try:
        (hlen,) = _HEADER_LEN.unpack_from(view, len(MAGIC))
        start = len(MAGIC) + _HEADER_LEN.size
        header = json.loads(view[start : start + hlen].tobytes())
        base = start + hlen
        base += -base % ALIGN
        blobs = header["blobs"]
        return _Decoder(buffer, view, base, blobs).tree(header["tree"])
    except CorruptCheckpointError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, struct.error) as err:
        raise CorruptCheckpointError(f"malformed checkpoint header: {err}") from err


class _Decoder:
    def __init__(self, buffer: Any, view: memoryview, base: int, blobs: list[list[int]]):
        self.buffer, self.view, self.base, self.blobs = buffer, view, base, blobs

    def span(self, index: int) -> tuple[int, int]:
        off, n = self.blobs[index]
        start = self.base + off
        if off < 0 or n < 0 or start + n > self.view.nbytes:
            raise CorruptCheckpointError("checkpoint is shorter than its header says")
        return start, n

    def raw(self, index: int) -> tuple[Any, int, int]:
        """(buffer, offset, size) of blob ``index``."""
        start, n = self.span(index)
        return self.buffer, start, n

    def tree(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.tree(v) for v in node]
        if not isinstance(node, dict):
            return node
        if "$array" in node:
            return self.array(node)
        if "$bytes" in node:
            buf, start, n = self.raw(node["$bytes"])
            return memoryview(buf).cast("B")[start : start + n].tobytes()
        if "$tuple" in node:
            return tuple(self.tree(v) for v in node["$tuple"])
        if "$map" in node:
            return {_hashable(self.tree(k)): self.tree(v) for k, v in node["$map"]}
        return {k: self.tree(v) for k, v in node.items()}

    def array(self, node: dict[str, Any]) -> Any:
        dtype, shape = array_type(node)
        buf, start, n = self.raw(node["$array"])
        count = int(np.prod(shape, dtype=np.int64))
        if count * dtype.itemsize != n:
            raise CorruptCheckpointError("array size does not match its dtype and shape")
        if n == 0:
            arr = np.empty(shape, dtype)
        else:
            arr = np.frombuffer(buf, dtype=dtype, count=count, offset=start).reshape(shape)
        return arr[()] if node.get("scalar") else arr


def array_type(node: dict[str, Any]) -> tuple[np.dtype, tuple[int, ...]]:
    """The dtype and shape an ``$array`` node of a header declares."""
    return npformat.descr_to_dtype(_descr(node["dtype"])), tuple(int(d) for d in node["shape"])


# -- reading in two halves: the header first, then the blobs straight into their destinations ------


@dataclass(frozen=True)
class Layout:
    """A checkpoint's header: its structure and where each blob lies (absolute byte offsets)."""

    head: int  # bytes before the first blob (header and its padding)
    tree: Any
    spans: tuple[tuple[int, int], ...]  # (start, size) of each blob, ascending, never overlapping


def head_length(prefix: bytes | bytearray | memoryview) -> int | None:
    """Bytes of header (padded) once ``prefix`` holds the fixed preamble; None while it is shorter.
    Raises :class:`CorruptCheckpointError` when the bytes are not a checkpoint."""
    view = memoryview(prefix).cast("B")
    if view.nbytes < len(MAGIC) + _HEADER_LEN.size:
        return None
    if view[: len(MAGIC)].tobytes() != MAGIC:
        raise CorruptCheckpointError("not a spotfleet checkpoint (bad magic bytes)")
    (hlen,) = _HEADER_LEN.unpack_from(view, len(MAGIC))
    base = len(MAGIC) + _HEADER_LEN.size + hlen
    return base + -base % ALIGN


def parse_layout(head: bytes | bytearray | memoryview, size: int) -> Layout:
    """The layout of a checkpoint of ``size`` bytes from its first :func:`head_length` bytes.

    Untrusted input: a header whose blobs leave the object, overlap or run backwards raises
    :class:`CorruptCheckpointError` (every blob then has a place of its own to be read into)."""
    view = memoryview(head).cast("B")
    base = head_length(view)
    if base is None or base > view.nbytes or base > size:
        raise CorruptCheckpointError("checkpoint is shorter than its header says")
    try:
        start = len(MAGIC) + _HEADER_LEN.size
        (hlen,) = _HEADER_LEN.unpack_from(view, len(MAGIC))
        header = json.loads(view[start : start + hlen].tobytes())
        tree, blobs = header["tree"], header["blobs"]
        spans = tuple((base + int(off), int(n)) for off, n in blobs)
    except (ValueError, KeyError, TypeError, RecursionError) as err:
        raise CorruptCheckpointError(f"malformed checkpoint header: {err}") from err
    end = base
    for lo, n in spans:
        if n < 0 or lo < end or lo + n > size:
            raise CorruptCheckpointError("checkpoint header places its blobs outside the object or over each other")
        end = lo + n
    return Layout(base, tree, spans)


def assemble(layout: Layout, blobs: list[Any]) -> dict[str, Any]:
    """The state of ``layout`` with blob ``i`` read from ``blobs[i]`` (a buffer of its size)."""
    try:
        state = _PlacedDecoder(blobs, layout).tree(layout.tree)
    except CorruptCheckpointError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, struct.error) as err:
        raise CorruptCheckpointError(f"malformed checkpoint header: {err}") from err
    if not isinstance(state, dict):
        raise CorruptCheckpointError("malformed checkpoint header: the state is not a dict")
    return state


class _PlacedDecoder(_Decoder):
    def __init__(self, blobs: list[Any], layout: Layout):
        super().__init__(b"", memoryview(b""), 0, [])
        self.placed, self.layout = blobs, layout

    def raw(self, index: int) -> tuple[Any, int, int]:
        if not isinstance(index, int) or not 0 <= index < len(self.placed):
            raise CorruptCheckpointError("checkpoint header names a blob it does not have")
        return self.placed[index], 0, self.layout.spans[index][1]


def _descr(d: Any) -> Any:
    """JSON turns the tuples of a structured dtype description into lists; turn them back."""
    if isinstance(d, list):
        return [tuple(_descr(x) for x in field) if isinstance(field, list) else field for field in d]
    return d


def _hashable(key: Any) -> Any:
    return tuple(_hashable(k) for k in key) if isinstance(key, list) else key
