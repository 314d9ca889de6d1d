"""Folding resident memory into huge pages after a fork snapshot: every byte kept, no memory
added (sparse ranges, the zero page and pages shared with a child are left alone), a fold that
stops when asked, the switch that turns it off, and what the manager does with it. Real memory
of this process, read back from ``/proc``; where the kernel cannot fold (no ``MADV_COLLAPSE``,
huge pages set to ``never``) the tests check that it says why and changes nothing."""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import threading

import numpy as np
import pytest

from fleet.checkpoint import CheckpointManager
from fleet.checkpoint import hugepages as hp
from fleet.checkpoint.forked import supported as fork_supported

pytestmark = pytest.mark.skipif(not fork_supported(), reason="huge pages are folded on Linux only")
MIB = 1024 * 1024
PAGE = mmap.PAGESIZE
needs_pagemap = pytest.mark.skipif(
    not os.access("/proc/self/pagemap", os.R_OK), reason="this sandbox hides /proc/self/pagemap"
)


def private(n: int) -> mmap.mmap:
    return mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def address(m: mmap.mmap) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


def vma_kib(start: int, field: str) -> int:
    """``field`` (``Rss``, ``AnonHugePages``) of the mapping that holds ``start``, in KiB, from
    ``/proc/self/smaps`` (summed when the kernel shows it as several mappings)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= start < hi
            elif inside and head == f"{field}:":
                total += int(line.split()[1])
    return total


@pytest.fixture
def regions():
    """Three 32 MiB private anonymous regions: full of random bytes, every other page written,
    and only read (the kernel's zero page). (``MADV_HUGEPAGE`` does not make a fold happen:
    ``MADV_COLLAPSE`` ignores it.)"""
    rng = np.random.default_rng(7)
    full, sparse, zero = private(32 * MIB), private(32 * MIB), private(32 * MIB)
    full[:] = rng.bytes(32 * MIB)
    full.madvise(mmap.MADV_HUGEPAGE)  # a flag of its own keeps it a mapping of its own in smaps
    for at in range(0, 32 * MIB, 2 * PAGE):
        sparse[at : at + 8] = b"sparse!!"
    assert sum(zero[at] for at in range(0, 32 * MIB, PAGE)) == 0
    yield full, sparse, zero
    for m in (full, sparse, zero):
        m.close()


def digest(m: mmap.mmap) -> str:
    return hashlib.sha256(m).hexdigest()


@needs_pagemap
def test_a_fold_keeps_every_byte_and_adds_no_memory(regions):
    full, sparse, zero = regions
    before = [digest(m) for m in regions]
    rss = {name: vma_kib(address(m), "Rss") for name, m in zip(("sparse", "zero"), (sparse, zero))}
    huge = vma_kib(address(full), "AnonHugePages")
    found = hp.resident_blocks(hp.anonymous_ranges(), hp.huge_page_size())
    block = hp.huge_page_size()
    inside = lambda m: [r for r in found if address(m) <= r[0] < address(m) + len(m)]  # noqa: E731
    assert sum((hi - lo) // block for lo, hi in inside(full)) >= 32 * MIB // block - 1  # aligned interior
    assert inside(sparse) == [] and inside(zero) == []

    done = hp.compact()

    assert [digest(m) for m in regions] == before
    assert vma_kib(address(sparse), "Rss") <= rss["sparse"] + 4 and vma_kib(address(zero), "Rss") <= rss["zero"] + 4
    if done.skipped:  # this kernel cannot fold: it says why, and folded nothing
        assert done.folded == 0 and done.skipped == hp.supported()
    else:
        assert done.candidates >= 15 and done.folded + done.refused == done.candidates
        if done.refused == 0:  # the full region's aligned interior is in huge pages now
            assert vma_kib(address(full), "AnonHugePages") >= max(huge, 30 * 1024)


@needs_pagemap
def test_pages_shared_with_a_child_are_not_folded(regions):
    full = regions[0]
    block = hp.huge_page_size()
    start = -(-address(full) // block) * block
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child holds the pages shared until the parent closes the pipe
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    os.close(read)
    try:
        shared = hp.resident_blocks([(address(full), address(full) + len(full))], block)
    finally:
        os.close(write)
        os.waitpid(pid, 0)
    alone = hp.resident_blocks([(address(full), address(full) + len(full))], block)
    assert shared == []  # folding would give this process a private copy of the child's pages
    assert alone and alone[0][0] == start


def test_a_stopped_fold_ends_before_the_next_range(regions):
    stop = threading.Event()
    stop.set()
    done = hp.compact(stop)
    assert done.folded == 0
    assert done.skipped == (hp.supported() or "stopped")


@pytest.mark.parametrize("kernel_said", ["", "the kernel refuses MADV_COLLAPSE (EINVAL)"])
def test_the_environment_turns_it_off(regions, monkeypatch, kernel_said):
    """The switch is the reason given, whether or not an earlier fold found the kernel unable."""
    monkeypatch.setattr(hp, "_disabled", kernel_said or hp._disabled)
    monkeypatch.setenv(hp.ENV, "0")
    before = vma_kib(address(regions[0]), "AnonHugePages")
    done = hp.compact()
    assert (done.candidates, done.folded, done.skipped) == (0, 0, f"turned off by {hp.ENV}")
    assert vma_kib(address(regions[0]), "AnonHugePages") == before


def test_the_manager_folds_after_a_fork_snapshot_and_not_when_told_not_to(tmp_path):
    state = {"w": np.random.default_rng(3).random(4 * MIB // 8)}
    with CheckpointManager(f"file://{tmp_path}/on") as mgr:
        assert mgr.last_fold is None
        mgr.save_async(state, 1).result()
        state["w"] += 1.0  # training goes on
        mgr.wait()  # lets the fold finish
        fold = mgr.last_fold
        assert fold is not None and (fold.skipped == hp.supported() if fold.skipped else fold.candidates > 0)
        loaded, info = mgr.load_latest()
        assert info.step == 1 and np.array_equal(loaded["w"] + 1.0, state["w"])
    with CheckpointManager(f"file://{tmp_path}/off", hugepages=False) as mgr:
        mgr.save_async(state, 1).result()
        mgr.wait()
        assert mgr.last_fold is None
        assert not [t for t in threading.enumerate() if t.name == "checkpoint-hugepages" and t.is_alive()]


def test_no_fold_starts_while_another_child_still_shares_the_pages():
    folder = hp.Folder()
    folder.hold()  # two saves in flight (max_pending=2): two children share the pages
    folder.hold()
    folder.release()
    folder.wait()
    assert folder.last is None  # one child still holds the pages: folding them would copy them
    folder.release()
    folder.wait()
    assert folder.last is not None and folder.last.skipped in ("", hp.supported())
    folder.close()
