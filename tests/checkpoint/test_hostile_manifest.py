"""Manifests are untrusted input: a deeply nested, oversized or escaping manifest is skipped like any
corrupt checkpoint (readers fall back to the previous one) and never followed outside the layout."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from fleet.checkpoint import CheckpointManager
from fleet.checkpoint.layout import FORMAT, commit_key


class RecordingStore:
    """A real store that records every key it is asked to read."""

    def __init__(self, inner):
        self._inner, self.uri, self.keys = inner, inner.uri, []

    def _record(self, name):
        def call(key, *args):
            self.keys.append(key)
            return getattr(self._inner, name)(key, *args)

        return call

    def __getattr__(self, name):
        if name in ("read", "size", "download"):
            return self._record(name)
        return getattr(self._inner, name)


@pytest.mark.parametrize("depth", [200_000, 30_000])  # over the size cap; under it but too deep to parse
def test_a_deeply_nested_manifest_falls_back_to_the_previous_checkpoint(tmp_path, depth):
    mgr = CheckpointManager(f"file://{tmp_path}")
    good = mgr.save({"w": np.arange(5)}, 10)
    assert mgr.store.create(commit_key(20), b"[" * depth + b"]" * depth)
    state, info = mgr.load_latest()
    assert info == good and list(state["w"]) == [0, 1, 2, 3, 4]
    assert mgr.latest() == good
    assert mgr.list() == [good]


def manifest(step: int, data_key: str, data: bytes) -> bytes:
    return json.dumps(
        {
            "format": FORMAT,
            "step": step,
            "name": f"step-{step:012d}",
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "committed_at": 1.0,
            "data_key": data_key,
            "writer": "elsewhere",
        }
    ).encode()


@pytest.mark.parametrize(
    "escape",
    [
        "data/step-000000000005-x/../../../outside.ckpt",
        "data/step-000000000005-x/../../commits/../../outside.ckpt",
        "data/step-000000000005-/abs.ckpt",
        "data/step-000000000005-tok.ckpt/..",
    ],
)
def test_a_data_key_outside_the_layout_is_rejected_before_any_read(tmp_path, escape):
    root = tmp_path / "ckpt"
    mgr = CheckpointManager(f"file://{root}")
    older = mgr.save({"w": np.arange(3)}, 3)
    payload = mgr.store.read(commit_key(3))  # any bytes will do as the "outside" data
    (tmp_path / "outside.ckpt").write_bytes(payload)
    (root / "data" / "step-000000000005-x").mkdir()  # so the path resolves on disk
    assert mgr.store.create(commit_key(5), manifest(5, escape, payload))

    recording = RecordingStore(mgr.store)
    reader = CheckpointManager(store=recording)
    assert reader.latest() == older and reader.list() == [older]
    assert reader.load_latest()[1] == older
    assert not [k for k in recording.keys if ".." in k or k.endswith("outside.ckpt") or "/abs" in k]
