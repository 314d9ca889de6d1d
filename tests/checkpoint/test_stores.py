"""Each store backend against its real emulator: the primitives the commit protocol relies on."""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
import threading

import numpy as np
import pytest

from fleet.checkpoint import CheckpointError, CheckpointManager, open_store
from fleet.checkpoint import digest as digests
from fleet.checkpoint.errors import CorruptCheckpointError
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.stores.base import HashesWhileWriting, MiB, ReleasesCache


def test_large_upload_uses_parts_and_round_trips(location):
    store = location.store()  # 5 MiB parts: this payload needs three
    data = np.random.default_rng(1).integers(0, 256, 11 * MiB + 123, dtype=np.uint8).tobytes()
    payload = Payload.of([data[:777], data[777 : 6 * MiB], data[6 * MiB :]])
    store.upload("data/big", payload)
    assert store.size("data/big") == len(data)
    assert bytes(store.download("data/big", len(data))) == data
    assert store.list("data/") == ["data/big"]  # no part objects left behind


def test_download_checks_the_recorded_size(location):
    store = location.store()
    store.upload("data/x", Payload.of([b"12345"]))
    with pytest.raises(CorruptCheckpointError, match="5 bytes, expected 6"):
        store.download("data/x", 6)
    assert store.download("data/missing", 3) is None


def test_create_is_exclusive(location):
    store = location.store()
    assert store.create("commits/one", b"first") is True
    assert store.create("commits/one", b"second") is False
    assert store.read("commits/one") == b"first"


def test_racing_creates_exactly_one_wins(location):
    results: list[bool] = []
    barrier = threading.Barrier(4)

    def race(i: int) -> None:
        store = location.store()  # own client, as separate writers would have
        barrier.wait()
        results.append(store.create("commits/race", f"writer {i}".encode()))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, False, False, True]
    assert location.store().read("commits/race").startswith(b"writer ")


def test_list_read_size_delete(location):
    store = location.store()
    for key in ("data/b", "data/a", "commits/c"):
        store.upload(key, Payload.of([key.encode()]))
    assert store.list("data/") == ["data/a", "data/b"]
    assert store.list("") == ["commits/c", "data/a", "data/b"]
    assert store.read("data/a") == b"data/a" and store.read("data/zzz") is None
    assert store.size("commits/c") == len("commits/c") and store.size("nope") is None
    store.delete("data/a")
    store.delete("data/a")  # absent is success
    assert store.list("data/") == ["data/b"]


def test_overwrite_replaces_whole_object(location):
    store = location.store()
    store.upload("data/x", Payload.of([b"a" * 100]))
    store.upload("data/x", Payload.of([b"b" * 10]))
    assert store.read("data/x") == b"b" * 10


@pytest.mark.parametrize(
    "uri, message",
    [
        ("ftp://host/x", "unknown checkpoint storage scheme 'ftp'"),
        ("s3://", "no bucket in the checkpoint URI"),
        ("file://relative/dir", r"file:///dir \(three slashes\)"),
    ],
)
def test_bad_uris_name_the_problem(uri, message):
    with pytest.raises(CheckpointError, match=message) as err:
        open_store(uri, env={})
    assert "\n" not in str(err.value)


def test_missing_uri_says_how_to_set_it():
    with pytest.raises(CheckpointError, match=r"set \$SPOTFLEET_CHECKPOINT_URI"):
        CheckpointManager(env={})


def test_uri_from_the_environment(tmp_path):
    mgr = CheckpointManager(env={"SPOTFLEET_CHECKPOINT_URI": f"file://{tmp_path}/c"})
    mgr.save({"x": 1}, 1)
    assert mgr.latest().step == 1 and (tmp_path / "c" / "commits").is_dir()


def test_azure_without_connection_string_says_so():
    with pytest.raises(CheckpointError, match="set AZURE_STORAGE_CONNECTION_STRING"):
        open_store("az://container/prefix", env={})


def test_missing_bucket_is_one_clear_line(location_factory):
    loc = location_factory("s3")
    bad = loc.uri.replace("s3://ckpt-tests", "s3://no-such-bucket")
    with pytest.raises(CheckpointError, match="bucket 'no-such-bucket' does not exist"):
        CheckpointManager(bad, env=loc.env).save({"x": 1}, 1)


@pytest.mark.parametrize("kind", ["gs", "az"])
def test_missing_bucket_other_clouds(location_factory, kind):
    loc = location_factory(kind)
    bad = loc.uri.replace(f"{kind}://ckpt-tests", f"{kind}://no-such-bucket")
    with pytest.raises(CheckpointError, match="no-such-bucket"):
        CheckpointManager(bad, env=loc.env).save({"x": 1}, 1)


def test_a_directory_store_hashes_while_it_writes(tmp_path):
    """The directory store writes and hashes in one pass (``HashesWhileWriting``): the digest it
    returns is the payload's, over several chunks and pieces, and the object holds the bytes."""
    store = open_store(f"file://{tmp_path}/hashed")
    assert isinstance(store, HashesWhileWriting)
    rng = np.random.default_rng(3)
    chunks = [memoryview(rng.bytes(n)) for n in (3 * MiB + 17, 1, 0, 2 * MiB)]
    payload = Payload.of(chunks)
    for algorithm in (digests.DEFAULT, digests.LEGACY):
        got = store.upload_hashed(f"data/{algorithm}", payload, algorithm)
        assert got == payload.digest(algorithm)
        assert store.read(f"data/{algorithm}") == payload.tobytes()


def _resident_pages(path) -> int:
    """Pages of ``path`` in the page cache now (``mincore`` over a mapping that touches none)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    size, page = os.path.getsize(path), os.sysconf("SC_PAGE_SIZE")
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        try:
            vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
            assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
            return sum(v & 1 for v in vec)
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def _filesystem(path) -> str:
    """The type of the filesystem mounted deepest above ``path`` (``/proc/mounts``)."""
    best, kind = "", ""
    for line in open("/proc/mounts").read().splitlines():
        point, fstype = line.split()[1], line.split()[2]
        if str(path).startswith(point.rstrip("/") + "/") and len(point) > len(best):
            best, kind = point, fstype
    return kind


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore and posix_fadvise semantics are Linux's")
def test_a_superseded_checkpoint_leaves_the_page_cache_and_still_loads(tmp_path):
    """Before a save writes, the checkpoint the manager committed last gives its cached pages back
    (``ReleasesCache``), so the new one reuses them; it stays on disk and loads as before."""
    if _filesystem(tmp_path) in ("tmpfs", "ramfs", "overlay"):
        pytest.skip(f"{_filesystem(tmp_path)} keeps written pages in memory whatever a reader advises")
    mgr = CheckpointManager(f"file://{tmp_path}/ck", keep_last=2)
    first = np.random.default_rng(5).integers(0, 255, 4 * MiB, dtype=np.uint8)
    mgr.save({"weights": first}, 1)
    old = mgr.latest()
    path = tmp_path / "ck" / old.data_key
    assert _resident_pages(path) > 0  # just written: in the page cache
    mgr.save({"weights": first[::-1].copy()}, 2)
    assert _resident_pages(path) == 0
    assert [i.step for i in mgr.list()] == [1, 2]
    assert np.array_equal(mgr.load(old)["weights"], first)
    assert isinstance(mgr.store, ReleasesCache)
    mgr.store.release_cache("data/no-such-object")  # best effort: a missing object is left alone
