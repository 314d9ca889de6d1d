"""Fewer page tables for the next fork: fold fully resident 2 MiB ranges into huge pages.

A fork snapshot (:mod:`fleet.checkpoint.forked`) blocks the caller for the ``fork()``, and a fork
copies one page-table entry, and takes one page reference, for every resident 4 KiB page of
the process: 20-45 ms per resident GB. A transparent huge page costs one entry for 2 MiB. But the
copy-on-write of a fork splits every huge page the process writes while the child runs (training
rewrites the whole state), so after a save the process is back to 4 KiB pages.

:func:`compact` folds them back, off the caller's path (the background thread of a forked save,
once the child has exited), with ``madvise(MADV_COLLAPSE)`` (Linux 6.1+): the kernel copies each
2 MiB range into a huge page, preserving its contents, while other threads keep running (one that
touches a range being folded waits for it).

Contract:

- Only ranges whose 512 pages are all resident and mapped by this process alone are folded (read
  from ``/proc/self/pagemap``), so memory does not grow: a sparse range would be filled with
  zeros, and a page shared with another process (a DataLoader worker forked from this one, the
  kernel's zero page) would get a private copy.
- Only private anonymous memory (the heap, ``malloc``'s and torch's mappings) is folded; never a
  file, a shared mapping, a stack or the kernel's special mappings.
- Contents never change: the kernel copies, and aborts a range whose pages change meanwhile
  (that range stays as it was).
- A kernel without ``MADV_COLLAPSE``, or with transparent huge pages set to ``never``, makes it a
  no-op for the rest of the process (:func:`supported`); a range the kernel refuses (no free huge
  page, a page pinned) is left as it was; 32 ranges in a row refused for want of memory end the
  call. Nothing here raises.
- The first fold after a process starts costs most (the kernel compacts free memory into huge
  pages: about 3 s of one core per GB on the benchmark's VM); later ones refold only what the
  last save split (0.1-0.3 s per GB).
- ``SPOTFLEET_HUGEPAGES=0`` in the environment turns it off.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MADV_COLLAPSE = 25  # <linux/mman.h>, Linux 6.1
ENV = "SPOTFLEET_HUGEPAGES"
log = logging.getLogger("fleet.checkpoint")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_ALONE = np.uint64(1 << 63 | 1 << 56)  # pagemap: resident, and mapped by this process only
_PAGEMAP_READ = 8 * 1024 * 1024  # bytes of page map read at once (4 GiB of addresses)
_REFUSALS_IN_A_ROW = 32

_disabled: str = ""  # why compaction is off for the rest of this process ("" while it is not)


@dataclass(frozen=True)
class Compaction:
    """What one :func:`compact` did: 2 MiB ranges found fully resident, folded, refused."""

    candidates: int
    folded: int
    refused: int
    seconds: float
    skipped: str = ""  # why nothing was tried (unsupported, turned off)


def supported() -> str:
    """Why this process cannot fold memory into huge pages; "" when it can."""
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return f"turned off by {ENV}"
    if _disabled:
        return _disabled
    if not sys.platform.startswith("linux"):
        return "huge pages are folded on Linux only"
    try:
        mode = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return "the kernel has no transparent huge pages"
    if "[never]" in mode:
        return "transparent huge pages are set to never"
    return ""


def huge_page_size() -> int:
    """The size of a transparent huge page (a PMD's reach): 2 MiB on x86-64."""
    try:
        return int(Path("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size").read_text())
    except (OSError, ValueError):
        return 2 * 1024 * 1024


def anonymous_ranges() -> list[tuple[int, int]]:
    """This process's private, writable, anonymous mappings as ``(start, end)`` addresses."""
    out = []
    with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) < 5 or fields[1][:2] != "rw" or fields[1][3] != "p":
                continue
            name = fields[5].strip() if len(fields) > 5 else ""
            if name not in ("", "[heap]") and not name.startswith("[anon:") or fields[4] != "0":
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            out.append((start, end))
    return out


def resident_blocks(ranges: list[tuple[int, int]], block: int) -> list[tuple[int, int]]:
    """Runs of ``block``-aligned ranges inside ``ranges`` whose pages are all resident and mapped
    by this process alone (``/proc/self/pagemap`` bits 63 and 56), merged into ``(start, end)``.

    A page shared with another process (a fork's child, a DataLoader worker) or the kernel's zero
    page is not "mapped alone": folding its range would give this process a private copy, so
    memory would grow."""
    per = block // _PAGE
    span = _PAGEMAP_READ // 8 // per * block  # addresses covered by one read of the page map
    runs: list[tuple[int, int]] = []
    fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    try:
        for start, end in ranges:
            first, last = -(-start // block) * block, end // block * block
            for lo in range(first, last, span):
                hi = min(lo + span, last)
                want = (hi - lo) // _PAGE * 8
                raw = os.pread(fd, want, lo // _PAGE * 8)
                if len(raw) != want:
                    break
                entries = np.frombuffer(raw, dtype=np.uint64)
                alone = (entries & _ALONE) == _ALONE
                for index in np.flatnonzero(alone.reshape(-1, per).all(axis=1)):
                    at = lo + int(index) * block
                    if runs and runs[-1][1] == at:
                        runs[-1] = (runs[-1][0], at + block)
                    else:
                        runs.append((at, at + block))
    finally:
        os.close(fd)
    return runs


def compact(stop: threading.Event | None = None) -> Compaction:
    """Fold this process's fully resident anonymous 2 MiB ranges into huge pages (see the module
    contract). Safe to call from any thread; blocks only the calling one (the GIL is released
    during each fold). ``stop``, once set, ends it between two ranges."""
    global _disabled
    t0 = time.perf_counter()
    why = supported()
    if why:
        return Compaction(0, 0, 0, 0.0, skipped=why)
    block = huge_page_size()
    try:
        runs = resident_blocks(anonymous_ranges(), block)
    except OSError as err:
        _disabled = f"cannot read this process's page map: {err.strerror or err}"
        return Compaction(0, 0, 0, time.perf_counter() - t0, skipped=_disabled)
    candidates = sum((end - start) // block for start, end in runs)
    folded, refused, skipped = _fold(runs, block, stop)
    return Compaction(candidates, folded, refused, time.perf_counter() - t0, skipped)


def _fold(runs: list[tuple[int, int]], block: int, stop: threading.Event | None) -> tuple[int, int, str]:
    """``MADV_COLLAPSE`` each ``block`` of ``runs``, one a call (a refusal spoils only its own
    range): how many were folded and refused, and why it ended early ("" when it did not)."""
    global _disabled
    madvise = _madvise()
    folded = refused = in_a_row = 0
    for start, end in runs:
        for lo in range(start, end, block):
            if stop is not None and stop.is_set():
                return folded, refused, "stopped"
            if madvise(lo, block, MADV_COLLAPSE) == 0:
                folded, in_a_row = folded + 1, 0
                continue
            code = ctypes.get_errno()
            if code in (errno.EINVAL, errno.EPERM, errno.ENOSYS):  # no MADV_COLLAPSE on this kernel
                _disabled = f"the kernel refuses MADV_COLLAPSE ({errno.errorcode.get(code, code)})"
                return folded, refused, _disabled
            refused += 1  # EAGAIN: a page pinned, locked or busy; ENOMEM: no huge page free
            in_a_row = in_a_row + 1 if code == errno.ENOMEM else 0
            if in_a_row >= _REFUSALS_IN_A_ROW:  # memory is short now: do not press the kernel
                return folded, refused, "the kernel has no huge pages free"
    return folded, refused, ""


@functools.cache
def _madvise() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.madvise
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


class Folder:
    """Folds in the background after fork snapshots, one fold at a time (see the module).

    ``hold()`` before a fork: stops a running fold and counts one more child sharing the pages
    (folding a shared range would give this process a copy of it); ``release()`` once that child
    is gone (or was never started): when no child remains, a fold starts unless one is running.
    ``stop()`` ends a running fold between two ranges (a synchronous save is about to run, and
    wants the CPU); ``wait()`` lets a running fold finish; ``close()`` stops and joins. ``last``
    is the latest finished fold's :class:`Compaction`.
    """

    def __init__(self) -> None:
        self.last: Compaction | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._children = 0

    def hold(self) -> None:
        self._stop.set()
        with self._lock:
            self._children += 1

    def release(self) -> None:
        with self._lock:
            self._children = max(0, self._children - 1)
            if self._children or self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="checkpoint-hugepages", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def wait(self) -> None:
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()

    def close(self) -> None:
        self.stop()
        self.wait()

    def _run(self) -> None:
        self.last = compact(self._stop)
        log.debug("huge pages: %s", self.last)
