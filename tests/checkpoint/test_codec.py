"""The safe serialiser: exact round trips, refusal of unsafe values, corrupt input detected."""

from __future__ import annotations

import hashlib
import io
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.checkpoint.codec import decode, encode
from fleet.checkpoint.errors import CorruptCheckpointError, UnsupportedStateError
from fleet.checkpoint.payload import Payload


def roundtrip(state: dict) -> dict:
    return decode(bytearray(encode(state).tobytes()))


def test_arrays_keep_dtype_shape_and_bits():
    rng = np.random.default_rng(7)
    state = {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f16": rng.standard_normal(5).astype(np.float16),
        "i64": np.arange(-5, 5, dtype=np.int64),
        "u8": np.frombuffer(b"\x00\xff\x10", dtype=np.uint8),
        "c128": np.array([1 + 2j, -3j]),
        "bool": np.array([True, False]),
        "empty": np.empty((0, 3), dtype=np.float32),
        "zero_d": np.array(3.5),
        "strided": np.arange(24).reshape(4, 6)[:, ::2],
        "fortran": np.asfortranarray(rng.standard_normal((3, 2))),
        "structured": np.zeros(2, dtype=[("a", "<f4"), ("b", "<i8", (2,)), ("c", [("x", "<f2")])]),
        "big_endian": np.arange(4, dtype=">i4"),
    }
    out = roundtrip(state)
    for name, arr in state.items():
        assert out[name].dtype == arr.dtype, name
        assert out[name].shape == arr.shape, name
        assert out[name].tobytes() == np.ascontiguousarray(arr).tobytes(), name
        assert out[name].flags.writeable, name


def test_python_values_and_containers():
    state = {
        "none": None,
        "t": True,
        "i": -(2**80),
        "f": 0.1,
        "nan": math.nan,
        "inf": -math.inf,
        "s": "héllo",
        "b": b"\x00raw",
        "ba": bytearray(b"xy"),
        "list": [1, [2, (3, 4)]],
        "tuple": (1, "a", None),
        "int_keys": {0: "a", 1: {"x": 2}},
        "tuple_keys": {(1, 2): 3},
        "$dollar": {"$array": 1},
        "np_scalar": np.float32(1.25),
        "np_int": np.int16(-3),
    }
    out = roundtrip(state)
    assert out["list"] == [1, [2, (3, 4)]]
    assert out["tuple"] == (1, "a", None) and isinstance(out["tuple"], tuple)
    assert out["int_keys"] == {0: "a", 1: {"x": 2}}
    assert out["tuple_keys"] == {(1, 2): 3}
    assert out["$dollar"] == {"$array": 1}
    assert out["ba"] == b"xy" and out["b"] == b"\x00raw"
    assert out["i"] == -(2**80) and out["f"] == 0.1 and math.isnan(out["nan"]) and out["inf"] == -math.inf
    assert type(out["np_scalar"]) is np.float32 and out["np_scalar"] == np.float32(1.25)
    assert type(out["np_int"]) is np.int16 and out["np_int"] == -3


def test_rng_states_round_trip_and_continue_identically():
    random.seed(3)
    np.random.seed(4)
    gen = np.random.default_rng(5)
    state = {"py": random.getstate(), "np": np.random.get_state(), "gen": gen.bit_generator.state}
    expected = (random.random(), np.random.rand(), gen.random())
    out = roundtrip(state)
    random.setstate(out["py"])
    np.random.set_state(out["np"])
    gen.bit_generator.state = out["gen"]
    assert (random.random(), np.random.rand(), gen.random()) == expected


def test_snapshot_is_independent_of_later_mutation():
    arr = np.zeros(1000)
    payload = encode({"w": arr})
    arr += 1
    assert decode(bytearray(payload.tobytes()))["w"].sum() == 0


@pytest.mark.parametrize(
    "value, where",
    [
        (object(), "state['bad']"),
        (np.array([object()]), "state['bad']"),
        ({1, 2}, "state['bad']"),
        ([1, lambda: 0], "state['bad'][1]"),
    ],
)
def test_unsupported_values_are_refused_with_their_path(value, where):
    with pytest.raises(UnsupportedStateError) as err:
        encode({"bad": value})
    assert str(err.value).startswith(where + ":")
    assert isinstance(err.value, TypeError)


def test_state_must_be_a_dict():
    with pytest.raises(UnsupportedStateError, match="expected a dict"):
        encode([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "mangle",
    [
        lambda b: b"NOT-A-CHECKPOINT" + b[16:],
        lambda b: b[:30],
        lambda b: b[:-8],
        lambda b: b[:24] + b"[" + b[25:],
    ],
)
def test_malformed_bytes_raise_corrupt_checkpoint(mangle):
    data = encode({"w": np.arange(16, dtype=np.float64), "s": "x"}).tobytes()
    with pytest.raises(CorruptCheckpointError):
        decode(bytearray(mangle(data)))


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.binary(max_size=16),
    st.lists(st.floats(allow_nan=False, width=32), max_size=6).map(lambda v: np.array(v, np.float32)),
)
trees = st.recursive(
    leaves,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.tuples(kids, kids),
        st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), kids, max_size=4),
    ),
    max_leaves=20,
)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=6), trees, max_size=5))
def test_any_storable_tree_round_trips(state):
    assert _same(state, roundtrip(state))


def test_payload_reader_reads_and_seeks_across_chunks():
    payload = Payload.of([b"abc", b"", b"defg", b"h"])
    assert payload.size == 8 and payload.sha256() == hashlib.sha256(b"abcdefgh").hexdigest()
    r = payload.reader()
    assert r.read(2) == b"ab" and r.read(3) == b"cde" and r.tell() == 5
    r.seek(-2, io.SEEK_END)
    assert r.read() == b"gh" and r.read(1) == b""
    r.seek(3)
    assert r.read(100) == b"defgh"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=9), max_size=6),
    st.lists(st.one_of(st.integers(min_value=-1, max_value=12), st.just(None)), max_size=8),
    st.integers(min_value=0, max_value=40),
)
def test_payload_reader_reads_what_a_bytesio_of_the_joined_chunks_reads(chunks, sizes, seek):
    """Whatever the chunk boundaries, reads and seeks return exactly the bytes an ``io.BytesIO``
    over the concatenation returns (how boto3 and the Azure and GCS SDKs read a payload)."""
    ours, theirs = Payload.of(chunks).reader(), io.BytesIO(b"".join(chunks))
    seek %= len(ours) + 1  # (past the end, BytesIO keeps the position and ours stops at the end)
    for i, size in enumerate(sizes):
        if i == 2:
            assert ours.seek(seek) == theirs.seek(seek)
        got = ours.read(size)
        assert type(got) is bytes and got == theirs.read(size) and ours.tell() == theirs.tell()


def test_payload_slices_span_chunks_without_copying():
    payload = Payload.of([b"abc", b"defg", b"h"])
    assert [payload.slice(s, n).tobytes() for s, n in [(0, 8), (2, 3), (3, 4), (7, 5), (8, 1)]] == [
        b"abcdefgh",
        b"cde",
        b"defg",
        b"h",
        b"",
    ]
    sub = payload.slice(1, 6).reader()
    sub.seek(2)
    assert sub.read() == b"defg"
