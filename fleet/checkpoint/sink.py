"""Download one data object straight to where its bytes belong, checking its digest on the way.

A :class:`PlacedDownload` is the writable, seekable stream a store downloads into (SDKs write to
it with ``seek``/``write``, possibly out of order from parallel ranged reads; the directory store
fills it in place with ``window``/``filled``, without a copy). Where each byte goes is decided by
``plan(prefix)``: called with the bytes received so far from offset 0, it returns None while it
needs more of them (a checkpoint's header), then the regions ``[(start, buffer), ...]`` that
bytes should land in (ascending, non-overlapping, inside the object): the tensors of a load
target, or fresh buffers. Bytes outside every region are hashed and dropped.

The digest (the algorithm the manifest names, :mod:`fleet.checkpoint.digest`) is computed in
object order on a thread of its own while the download goes on (the hash reads each region once
its bytes are in), so verifying costs no extra pass over the data.
:meth:`PlacedDownload.verify` waits for it and raises :class:`CorruptCheckpointError` when the
object was short or its digest differs. Until then the regions hold unverified bytes.
"""

from __future__ import annotations

import bisect
import io
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from fleet.checkpoint import digest as digests
from fleet.checkpoint.errors import CorruptCheckpointError

Region = tuple[int, Any]  # (start offset in the object, writable buffer of the region's size)
Plan = Callable[[memoryview], "Sequence[Region] | None"]
_LEAD = 64 * 1024  # bytes read ahead of the plan at a time (a header is usually smaller)


class PlacedDownload(io.RawIOBase):
    """A stream for one object of ``size`` bytes whose hex digest (by ``algorithm``) should be
    ``expected`` (see the module doc). An unknown ``algorithm`` raises :class:`CorruptCheckpointError`.

    Writes may come from several threads (an SDK's parallel ranged reads); each ``write`` and each
    ``window``/``filled`` pair holds the stream's lock.
    """

    def __init__(self, size: int, expected: str, plan: Plan, *, name: str = "object", algorithm: str = digests.DEFAULT):
        super().__init__()
        try:
            self._digest = digests.new(algorithm)
        except digests.UnknownDigestError as err:
            raise CorruptCheckpointError(f"data object {name}: {err}") from err
        self.size, self.expected, self.name, self.algorithm = size, expected, name, algorithm
        self._plan = plan
        self._pos = 0
        self.lock = threading.RLock()
        self._lead, self._lead_n = bytearray(), 0  # bytes from offset 0 while the plan is unknown
        self._early: dict[int, memoryview] = {}  # bytes further on while the plan is unknown
        self._planned = False
        self._starts: list[int] = []
        self._views: list[memoryview] = []
        self._scratch: tuple[int, memoryview] | None = None  # the last window outside every region
        self._gaps: dict[int, memoryview] = {}  # bytes outside every region, until hashed
        self._filled: dict[int, int] = {}  # start -> end of bytes in, not hashed yet
        self._hashed = 0
        self._hasher = ThreadPoolExecutor(1, thread_name_prefix="checkpoint-verify")
        self._jobs: list[Future[None]] = []

    # -- the stream an SDK writes to -------------------------------------------------------------

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = min(max(0, base + offset), self.size)
        return self._pos

    def write(self, data: Any) -> int:  # type: ignore[override]
        src = memoryview(data).cast("B")
        with self.lock:
            at = self._pos
            if at + src.nbytes > self.size:
                raise ValueError(f"{self.name} is larger than its recorded size ({self.size} bytes)")
            self._put(at, src)
            self._pos = at + src.nbytes
        return src.nbytes

    def _put(self, at: int, src: memoryview) -> None:
        done = 0
        while done < src.nbytes:
            view = self.window(at + done, src.nbytes - done)
            view[:] = src[done : done + view.nbytes]
            self.filled(at + done, view.nbytes)
            done += view.nbytes

    # -- in-place filling (the directory store reads into these windows) --------------------------

    def window(self, pos: int, n: int) -> memoryview:
        """Writable memory for up to ``n`` bytes at ``pos`` (at least one byte); write into it,
        then call :meth:`filled` with how many bytes were written."""
        with self.lock:
            n = min(n, self.size - pos)
            if n <= 0 or pos < 0:
                raise ValueError(f"{self.name}: nothing to write at {pos} (size {self.size})")
            if not self._planned:
                if pos == self._lead_n:
                    take = min(n, _LEAD)
                    if len(self._lead) < pos + take:
                        self._lead.extend(bytes(pos + take - len(self._lead)))
                    return memoryview(self._lead)[pos : pos + take]
                return self._scratch_at(pos, n)
            i = bisect.bisect_right(self._starts, pos) - 1
            if i >= 0 and pos < self._starts[i] + self._views[i].nbytes:
                lo = pos - self._starts[i]
                return self._views[i][lo : lo + n]
            nxt = self._starts[i + 1] if i + 1 < len(self._starts) else self.size
            return self._scratch_at(pos, min(n, nxt - pos))

    def _scratch_at(self, pos: int, n: int) -> memoryview:
        view = memoryview(bytearray(min(n, 16 * 1024 * 1024)))
        self._scratch = (pos, view)
        return view

    def filled(self, pos: int, n: int) -> None:
        """``n`` bytes at ``pos`` were written into the window :meth:`window` returned for ``pos``."""
        with self.lock:
            if n <= 0:
                return
            scratch = self._scratch if self._scratch is not None and self._scratch[0] == pos else None
            self._scratch = None
            if not self._planned:
                if scratch is not None:
                    self._early[pos] = scratch[1][:n]
                    return
                self._lead_n = max(self._lead_n, pos + n)
                self._try_plan()
                return
            self._record(pos, pos + n, scratch[1][:n] if scratch is not None else None)
            self._advance()

    def _record(self, pos: int, end: int, gap: memoryview | None) -> None:
        """Note bytes ``[pos, end)`` as in; the part already hashed (a retried range) is dropped."""
        if end <= self._hashed:
            return
        if pos < self._hashed:
            if gap is not None:
                gap = gap[self._hashed - pos :]
            pos = self._hashed
        if end >= self._filled.get(pos, 0):
            self._filled[pos] = end
            if gap is not None:
                self._gaps[pos] = gap

    def _try_plan(self) -> None:
        regions = self._plan(memoryview(self._lead)[: self._lead_n])
        if regions is None:
            if self._lead_n >= self.size:
                raise CorruptCheckpointError(f"{self.name}: the object ends inside its header")
            return
        end = 0
        for start, buf in regions:
            view = memoryview(buf).cast("B")
            if start < end or start + view.nbytes > self.size:
                raise CorruptCheckpointError(f"{self.name}: regions overlap or leave the object")
            if view.nbytes:
                self._starts.append(start)
                self._views.append(view)
            end = start + view.nbytes
        self._planned = True
        lead, early = memoryview(self._lead)[: self._lead_n], self._early
        self._early = {}
        self._put(0, lead)
        for pos, data in sorted(early.items()):
            self._put(pos, data)
        self._lead = bytearray()

    def _advance(self) -> None:
        """Hash, in object order, whatever is in from the hashed prefix on (on the hash thread)."""
        pieces: list[memoryview] = []
        while self._hashed in self._filled:
            pos = self._hashed
            end = self._filled.pop(pos)
            gap = self._gaps.pop(pos, None)
            if gap is not None:
                pieces.append(gap[: end - pos])
            else:
                i = bisect.bisect_right(self._starts, pos) - 1
                lo = pos - self._starts[i]
                pieces.append(self._views[i][lo : lo + end - pos])
            self._hashed = end
            for stale in [k for k in self._filled if k < end]:  # a retried range, partly hashed
                self._record(stale, self._filled.pop(stale), self._gaps.pop(stale, None))
        if pieces:
            self._jobs.append(self._hasher.submit(self._update, pieces))

    def _update(self, pieces: list[memoryview]) -> None:
        for piece in pieces:
            self._digest.update(piece)

    # -- verification ------------------------------------------------------------------------------

    def verify(self) -> None:
        """Wait for the hash; raise :class:`CorruptCheckpointError` when bytes are missing or the
        digest differs from the expected one."""
        try:
            for job in self._jobs:
                job.result()
        finally:
            self._hasher.shutdown(wait=True)
        if not self._planned or self._hashed < self.size:
            got = self._hashed if self._planned else self._lead_n
            raise CorruptCheckpointError(f"data object {self.name} ended after {got} of {self.size} bytes")
        if self._digest.hexdigest() != self.expected:
            raise CorruptCheckpointError(f"data object {self.name} fails its {digests.label(self.algorithm)} check")

    def close(self) -> None:
        """Stop the hash thread (after :meth:`verify`, or after a failed download)."""
        self._hasher.shutdown(wait=True)
        super().close()


def whole(buffer: Any) -> Plan:
    """A plan that puts the whole object into ``buffer`` (of the object's size)."""
    return lambda _prefix: [(0, buffer)]
