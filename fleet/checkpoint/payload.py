"""Serialised checkpoint bytes held as a list of buffers, and the file-like adapters stores use.

A :class:`Payload` built by ``codec.encode`` holds private copies (a snapshot), so a background
upload can read them while training mutates its own arrays; one built by ``codec.encode_views``
holds views of the caller's arrays (a synchronous save, no copy), valid while the caller waits.
Stores read it through :meth:`Payload.reader` (a seekable raw stream, one per transfer attempt)
and download into a preallocated ``bytearray`` through :class:`BufferWriter`.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from fleet.checkpoint import digest as digests


@dataclass(frozen=True)
class Payload:
    """The bytes of one checkpoint, as consecutive chunks (no concatenation copy)."""

    chunks: tuple[memoryview, ...]

    @classmethod
    def of(cls, chunks: Sequence[bytes | bytearray | memoryview]) -> Payload:
        return cls(tuple(memoryview(c).cast("B") for c in chunks if len(c)))

    @property
    def size(self) -> int:
        return sum(c.nbytes for c in self.chunks)

    def digest(self, algorithm: str = digests.DEFAULT) -> str:
        """Hex digest of the whole payload (both algorithms release the GIL on large buffers)."""
        h = digests.new(algorithm)
        for chunk in self.chunks:
            h.update(chunk)
        return h.hexdigest()

    def sha256(self) -> str:
        """Hex SHA-256 of the whole payload (what manifests of format /1 record)."""
        return self.digest(digests.LEGACY)

    def blocks(self, size: int) -> Iterator[memoryview]:
        """The payload in order as views of at most ``size`` bytes (no copy)."""
        for chunk in self.chunks:
            for lo in range(0, chunk.nbytes, size):
                yield chunk[lo : lo + size]

    def reader(self) -> ChunkReader:
        """A fresh seekable stream over the payload, positioned at 0."""
        return ChunkReader(self.chunks)

    def tobytes(self) -> bytes:
        return b"".join(self.chunks)

    def slice(self, start: int, n: int) -> Payload:
        """Bytes ``[start, start + n)`` as a payload of their own (no copy)."""
        parts, pos, end = [], 0, start + n
        for chunk in self.chunks:
            lo, hi = max(start, pos), min(end, pos + chunk.nbytes)
            if lo < hi:
                parts.append(chunk[lo - pos : hi - pos])
            pos += chunk.nbytes
        return Payload(tuple(parts))


class _SeekableStream(io.RawIOBase):
    """Position bookkeeping shared by the payload reader and the download writer."""

    _pos = 0

    def _length(self) -> int:
        raise NotImplementedError

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._length()}[whence]
        self._pos = min(max(0, base + offset), self._length())
        self._moved()
        return self._pos

    def _moved(self) -> None:
        """Hook: the position changed by a seek."""


class ChunkReader(_SeekableStream):
    """Read-only, seekable raw stream over a sequence of buffers."""

    def __init__(self, chunks: Sequence[memoryview]):
        super().__init__()
        self._chunks = list(chunks)
        self._starts: list[int] = []
        total = 0
        for c in self._chunks:
            self._starts.append(total)
            total += c.nbytes
        self._size = total
        self._pos = 0
        self._index = 0  # chunk that holds self._pos (or len(chunks) at the end)

    def readable(self) -> bool:
        return True

    def __len__(self) -> int:
        return self._size

    def _length(self) -> int:
        return self._size

    def _moved(self) -> None:
        self._index = 0
        while (
            self._index < len(self._chunks)
            and self._starts[self._index] + self._chunks[self._index].nbytes <= self._pos
        ):
            self._index += 1

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        out = memoryview(buffer).cast("B")
        written = 0
        while written < out.nbytes and self._index < len(self._chunks):
            chunk = self._chunks[self._index]
            start = self._pos - self._starts[self._index]
            n = min(chunk.nbytes - start, out.nbytes - written)
            out[written : written + n] = chunk[start : start + n]
            written += n
            self._pos += n
            if start + n == chunk.nbytes:
                self._index += 1
        return written

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = self._size - self._pos
        size = max(0, min(size, self._size - self._pos))
        pieces: list[memoryview] = []
        while size and self._index < len(self._chunks):
            chunk = self._chunks[self._index]
            start = self._pos - self._starts[self._index]
            n = min(chunk.nbytes - start, size)
            pieces.append(chunk[start : start + n])
            size -= n
            self._pos += n
            if start + n == chunk.nbytes:
                self._index += 1
        # one copy, straight into the bytes returned (no scratch buffer to copy out of)
        return pieces[0].tobytes() if len(pieces) == 1 else b"".join(pieces)


class BufferWriter(_SeekableStream):
    """Writable, seekable stream into a preallocated ``bytearray`` (parallel ranged downloads)."""

    def __init__(self, size: int):
        super().__init__()
        self.buffer = bytearray(size)
        self._view = memoryview(self.buffer)
        self._pos = 0
        self.high_water = 0  # furthest byte written: a short download leaves it < size

    def writable(self) -> bool:
        return True

    def _length(self) -> int:
        return len(self.buffer)

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        src = memoryview(data).cast("B")
        end = self._pos + src.nbytes
        if end > len(self.buffer):
            raise ValueError(f"object is larger than its recorded size ({len(self.buffer)} bytes)")
        self._view[self._pos : end] = src
        self._pos = end
        self.high_water = max(self.high_water, end)
        return src.nbytes
