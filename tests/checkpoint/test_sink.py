"""PlacedDownload: bytes land in the regions the plan picks, the digest (XXH3-128, or SHA-256 of a
format /1 manifest) is the object's whatever order the writes come in (parallel ranged downloads, retried ranges), and short or wrong data
is refused."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest
import xxhash

from fleet.checkpoint import CheckpointManager, CorruptCheckpointError, codec
from fleet.checkpoint.sink import PlacedDownload

DATA = bytes(random.Random(3).randbytes(300_000))
SHA = hashlib.sha256(DATA).hexdigest()
DIGESTS = {"sha256": SHA, "xxh3-128": xxhash.xxh3_128(DATA).hexdigest()}


def regions():
    a, b = bytearray(1000), bytearray(50_000)
    return a, b, [(10, a), (200_000, b)]


def finish(sink: PlacedDownload) -> None:
    try:
        sink.verify()
    finally:
        sink.close()


@pytest.mark.parametrize("algorithm", sorted(DIGESTS))
@pytest.mark.parametrize("order", ["in order", "shuffled", "retried"])
def test_writes_in_any_order_land_in_their_regions_and_verify(order, algorithm):
    a, b, plan = regions()
    sink = PlacedDownload(len(DATA), DIGESTS[algorithm], lambda _prefix: plan, algorithm=algorithm)
    spans = [(lo, min(lo + 7_000, len(DATA))) for lo in range(0, len(DATA), 7_000)]
    if order == "shuffled":
        random.Random(1).shuffle(spans)
    if order == "retried":  # a part written twice, the second time after others
        spans = spans[:5] + spans[2:4] + spans[5:]
    for lo, hi in spans:
        sink.seek(lo)
        sink.write(DATA[lo:hi])
    finish(sink)
    assert bytes(a) == DATA[10:1010] and bytes(b) == DATA[200_000:250_000]


def test_the_plan_waits_for_the_prefix_it_needs():
    seen = []

    def plan(prefix):
        seen.append(prefix.nbytes)
        return None if prefix.nbytes < 100_000 else []

    sink = PlacedDownload(len(DATA), SHA, plan, algorithm="sha256")
    for lo in range(0, len(DATA), 30_000):
        sink.write(DATA[lo : lo + 30_000])
    finish(sink)
    assert seen[-1] >= 100_000 and all(n < 100_000 for n in seen[:-1])


@pytest.mark.parametrize("algorithm, label", [("sha256", "SHA-256"), ("xxh3-128", "XXH3-128")])
def test_a_short_or_altered_object_is_corrupt(algorithm, label):
    sink = PlacedDownload(len(DATA), DIGESTS[algorithm], lambda _p: [], algorithm=algorithm)
    sink.write(DATA[:-1])
    with pytest.raises(CorruptCheckpointError, match="ended after"):
        finish(sink)
    sink = PlacedDownload(len(DATA), DIGESTS[algorithm], lambda _p: [], algorithm=algorithm)
    sink.write(DATA[:-1] + b"\0")
    with pytest.raises(CorruptCheckpointError, match=label):
        finish(sink)


@pytest.mark.parametrize("algorithm", ["md5", "", "XXH3-128", "sha256\n"])
def test_an_unknown_digest_algorithm_is_corrupt_before_any_byte_lands(algorithm):
    with pytest.raises(CorruptCheckpointError, match="not one this version verifies"):
        PlacedDownload(len(DATA), SHA, lambda _p: [], name="data/x.ckpt", algorithm=algorithm)


def test_a_header_placing_blobs_over_each_other_is_corrupt():
    payload = codec.encode({"a": np.arange(100), "b": np.arange(50)})
    head = codec.head_length(payload.tobytes())
    layout = codec.parse_layout(payload.tobytes()[:head], payload.size)
    assert len(layout.spans) == 2
    raw = bytearray(payload.tobytes())
    text = raw[:head].decode("latin-1")
    hostile = text.replace('"blobs":[[0,800],[832,', '"blobs":[[0,800],[  8,')  # same length
    assert hostile != text
    with pytest.raises(CorruptCheckpointError, match="over each other"):
        codec.parse_layout(hostile.encode("latin-1"), payload.size)


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_a_checkpoint_loads_through_parallel_ranged_downloads(location_factory, kind):
    loc = location_factory(kind)
    from fleet.checkpoint import TransferSettings

    mgr = CheckpointManager(loc.uri, env=loc.env, transfer=TransferSettings(part_size=5 * 1024 * 1024, concurrency=4))
    state = {"w": np.random.default_rng(0).random(3_000_000), "tag": b"x" * 10}
    mgr.save(state, 1)
    loaded, info = mgr.load_latest()
    assert info.step == 1 and np.array_equal(loaded["w"], state["w"]) and loaded["tag"] == state["tag"]
