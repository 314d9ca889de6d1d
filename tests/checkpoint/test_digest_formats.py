"""Manifests name their digest algorithm: format /2 (XXH3-128) is written, format /1 (SHA-256,
written by earlier versions) still loads and verifies, and an algorithm this version does not
know is refused with a message naming it; readers then fall back as for any corrupt manifest."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from fleet.checkpoint import CheckpointError, CheckpointManager, CorruptCheckpointError
from fleet.checkpoint.commit import upload_part
from fleet.checkpoint.digest import UnknownDigestError
from fleet.checkpoint.layout import FORMAT, FORMAT_V1, CheckpointInfo, Part, commit_key
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.torch import load

FORMAT1 = Path(__file__).parent / "fixtures" / "format1"


@pytest.fixture
def old_location(tmp_path: Path) -> Path:
    root = tmp_path / "old"
    shutil.copytree(FORMAT1, root)
    return root


def seeded_linear() -> torch.nn.Linear:
    torch.manual_seed(0)
    return torch.nn.Linear(4, 2)


def test_a_format_1_location_loads_and_verifies(old_location):
    mgr = CheckpointManager(f"file://{old_location}")
    assert [(i.step, i.algorithm, len(i.digest)) for i in mgr.list()] == [(3, "sha256", 64), (5, "sha256", 64)]
    assert mgr.latest(verify=True).step == 5
    target = {"model": torch.nn.Linear(4, 2), "half": torch.zeros(5, dtype=torch.bfloat16), "step": 0}
    state, info = load(mgr, target)
    expected = seeded_linear()
    assert info.step == 5 and target["step"] == 5
    assert torch.equal(target["model"].weight, expected.weight) and torch.equal(target["model"].bias, expected.bias)
    assert torch.equal(target["half"], torch.arange(5, dtype=torch.bfloat16))
    older = mgr.load(mgr.list()[0])
    assert older["note"] == "written by format /1"
    np.testing.assert_array_equal(older["w"], np.arange(6, dtype=np.float32).reshape(2, 3))


def test_a_format_1_object_is_still_sha256_checked(old_location, caplog):
    data = next((old_location / "data").glob("step-000000000005-*.ckpt"))
    raw = bytearray(data.read_bytes())
    raw[-1] ^= 0x01
    data.write_bytes(bytes(raw))
    mgr = CheckpointManager(f"file://{old_location}")
    with caplog.at_level(logging.WARNING, logger="fleet.checkpoint"):
        state, info = mgr.load_latest()
    assert info.step == 3 and state["step"] == 3
    assert "fails its SHA-256 check" in caplog.text


def test_saving_into_a_format_1_location_writes_format_2_and_retention_spans_both(old_location):
    mgr = CheckpointManager(f"file://{old_location}", keep_last=2)
    info = mgr.save({"w": np.arange(3)}, 6)
    doc = json.loads((old_location / "commits" / "step-000000000006.json").read_bytes())
    assert (doc["format"], doc["algorithm"], len(doc["digest"])) == (FORMAT, "xxh3-128", 32) and "sha256" not in doc
    assert [i.step for i in mgr.list()] == [5, 6]  # step 3 (format /1) pruned
    assert mgr.load_latest()[1] == info
    mgr.close()


def test_saving_a_format_1_step_again_with_its_content_is_a_no_op(old_location):
    for path in [*(old_location / "data").glob("step-000000000005-*"), old_location / commit_key(5)]:
        path.unlink()
    mgr = CheckpointManager(f"file://{old_location}")
    existing = mgr.latest()
    again = mgr.save({"w": np.arange(6, dtype=np.float32).reshape(2, 3), "note": "written by format /1", "step": 3}, 3)
    assert again == existing and again.algorithm == "sha256"
    with pytest.raises(CheckpointError, match="already committed"):
        mgr.save({"w": np.zeros(1)}, 3)


def test_a_sha256_info_is_written_as_format_1_byte_for_byte():
    raw = (FORMAT1 / commit_key(3)).read_bytes()
    info = CheckpointInfo.from_manifest(raw)
    assert info.to_manifest() == raw and json.loads(raw)["format"] == FORMAT_V1


def manifest_v2(step: int, data_key: str, data: bytes, algorithm: object) -> bytes:
    import xxhash

    doc = {
        "format": FORMAT,
        "step": step,
        "name": f"step-{step:012d}",
        "size": len(data),
        "digest": xxhash.xxh3_128(data).hexdigest(),
        "committed_at": 1.0,
        "data_key": data_key,
        "writer": "elsewhere",
        "metrics": {},
    }
    if algorithm is not ...:
        doc["algorithm"] = algorithm
    return json.dumps(doc).encode()


HOSTILE = [
    "md5",
    "",
    "XXH3-128",
    "sha256\n",
    "../../etc/passwd",
    "x" * 10_000,
    None,
    128,
    ["sha256"],
    {"name": "xxh3-128"},
    ...,
]


@pytest.mark.parametrize("algorithm", HOSTILE, ids=lambda a: repr(a)[:20])
def test_an_unknown_digest_algorithm_is_refused_by_name_and_readers_fall_back(tmp_path, caplog, algorithm):
    mgr = CheckpointManager(f"file://{tmp_path}")
    good = mgr.save({"w": np.arange(4)}, 1)
    data = mgr.store.read(good.data_key)
    assert mgr.store.create(commit_key(2), manifest_v2(2, good.data_key.replace("001-", "002-"), data, algorithm))
    mgr.store.upload(good.data_key.replace("001-", "002-"), Payload.of([data]))

    with pytest.raises(UnknownDigestError) as err:
        CheckpointInfo.from_manifest(mgr.store.read(commit_key(2)))
    message = str(err.value)
    assert "digest algorithm" in message and "xxh3-128" in message and "upgrade" in message
    assert "\n" not in message and len(message) < 200
    with caplog.at_level(logging.WARNING, logger="fleet.checkpoint"):
        state, info = mgr.load_latest()
    assert info == good and list(state["w"]) == [0, 1, 2, 3]
    assert "ignoring step 2" in caplog.text and "digest algorithm" in caplog.text
    assert mgr.latest(verify=True) == good and mgr.list() == [good]
    mgr.close()


def test_parts_hashed_with_different_algorithms_are_never_committed(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    part = upload_part(mgr.store, Payload.of([b"rank zero"]), 4, "tok-r0")
    odd = Part(part.key.replace("r0", "r1"), part.size, "0" * 64, "sha256")
    mgr.store.upload(odd.key, Payload.of([b"rank zero"]))
    with pytest.raises(CheckpointError, match="one digest algorithm"):
        mgr.commit_parts(4, [part, odd])
    assert mgr.list() == [] and mgr.store.list("data/") == []
    mgr.close()


def test_a_manifest_with_a_known_algorithm_but_wrong_digest_is_corrupt(tmp_path):
    mgr = CheckpointManager(f"file://{tmp_path}")
    info = mgr.save({"w": np.arange(4)}, 1)
    doc = json.loads(mgr.store.read(commit_key(1)))
    doc["digest"] = "0" * 32
    mgr.store.delete(commit_key(1))
    assert mgr.store.create(commit_key(1), json.dumps(doc).encode())
    with pytest.raises(CorruptCheckpointError, match="XXH3-128"):
        mgr.load(mgr.list()[0])
    assert mgr.load_latest() is None and info.algorithm == "xxh3-128"
