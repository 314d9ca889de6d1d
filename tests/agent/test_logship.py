"""The node log uploader and its reader, on a real directory store: the tail of a huge log, a
store that fails and recovers without the uploader ever raising, untrusted indexes, following
across a cut head, escaping, and the instance id each cloud's metadata gives."""

from __future__ import annotations

import logging
import threading

import pytest
from agent_support import wait_until

from fleet import nodelogs
from fleet.agent.detect import instance_id
from fleet.agent.logship import LogShipper
from fleet.checkpoint.stores import open_store
from fleet.errors import FleetError


def _shipper(tmp_path, *, max_bytes=nodelogs.MAX_BYTES, interval=5.0, instance="i-1", root=None):
    log = tmp_path / "node.log"
    uri = (root or tmp_path / "bucket").as_uri()
    return LogShipper(uri, log, lambda: instance, interval=interval, max_bytes=max_bytes), log, open_store(uri)


def test_uploads_only_changes_and_keeps_the_tail_of_a_big_log_from_a_line_start(tmp_path):
    shipper, log, store = _shipper(tmp_path, max_bytes=100)
    log.write_text("".join(f"line {i:03d}\n" for i in range(50)))  # 450 bytes
    assert shipper.ship_once() and not shipper.ship_once()  # unchanged: nothing sent
    meta, data = nodelogs.read_log(store, "i-1")
    assert data.startswith(b"line ") and data.endswith(b"line 049\n") and len(data) <= 100
    assert meta.offset + meta.length == meta.size == 450 and not meta.final
    with log.open("a") as f:
        f.write("line 050\n")
    assert shipper.ship_once(final=True)
    meta, data = nodelogs.read_log(store, "i-1")
    assert meta.final and meta.size == 459 and data.endswith(b"line 050\n")
    assert [m.instance for m in nodelogs.list_logs(store)] == ["i-1"]


def test_a_failing_store_never_stops_the_uploader_and_it_recovers(tmp_path, caplog):
    caplog.set_level(logging.INFO, "fleet.agent")
    blocked = tmp_path / "bucket"
    blocked.write_text("a file where the bucket folder should be")  # every upload fails (OSError)
    shipper, log, _ = _shipper(tmp_path, interval=0.05, root=blocked)
    log.write_text("hello\n")
    shipper.start()
    try:
        wait_until(lambda: shipper._failures >= 3, what="a few failed attempts")
        assert shipper.uploads == 0 and "node log not uploaded" in caplog.text
        blocked.unlink()  # the store comes back
        wait_until(lambda: shipper.uploads >= 1, what="an upload after the store recovered")
    finally:
        shipper.close()
    meta, data = nodelogs.read_log(open_store(blocked.as_uri()), "i-1")
    assert data == b"hello\n" and meta.final
    assert "uploaded again after" in caplog.text


def test_an_unknown_instance_id_is_asked_for_again(tmp_path):
    answers = iter(["", "i-late"])
    log = tmp_path / "node.log"
    log.write_text("x\n")
    shipper = LogShipper((tmp_path / "b").as_uri(), log, lambda: next(answers))
    with pytest.raises(RuntimeError, match="instance id is unknown"):
        shipper.ship_once()
    assert shipper.ship_once() and shipper.instance == "i-late"


def test_ids_with_slashes_stay_one_key(tmp_path):
    shipper, log, store = _shipper(tmp_path, instance="us-central1-a/node-1")
    log.write_text("gce\n")
    shipper.ship_once()
    assert [m.instance for m in nodelogs.list_logs(store)] == ["us-central1-a/node-1"]
    assert nodelogs.read_log(store, "us-central1-a/node-1")[1] == b"gce\n"


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[]",
        b'{"instance": "i-1", "size": -1, "offset": 0, "length": 0}',
        b'{"instance": "i-2", "size": 1, "offset": 0, "length": 1, "updated_at": 1}',
        b'{"instance": "i-1", "size": 5, "offset": 0, "length": 1, "updated_at": 1}',
    ],
)
def test_an_index_we_did_not_write_is_skipped_in_lists_and_refused_on_read(tmp_path, raw):
    store = open_store((tmp_path / "b").as_uri())
    store.create(nodelogs.index_key("i-1"), raw)
    assert nodelogs.list_logs(store) == []
    with pytest.raises(FleetError, match="not one spotfleet wrote"):
        nodelogs.read_log(store, "i-1")


def test_follow_yields_new_bytes_once_marks_a_cut_and_ends_with_the_final_upload(tmp_path):
    shipper, log, store = _shipper(tmp_path, max_bytes=20)
    log.write_text("a1\na2\n")
    shipper.ship_once()
    stop = threading.Event()
    chunks = nodelogs.follow(store, "i-1", since=6, stop=stop, interval=0.01)
    with log.open("a") as f:
        f.write("b1\n")
    shipper.ship_once()
    assert next(chunks) == b"b1\n"
    with log.open("a") as f:
        f.write("".join(f"c{i:02d}\n" for i in range(10)))  # more than max_bytes at once
    shipper.ship_once(final=True)
    rest = b"".join(chunks)
    assert rest.startswith(b"[spotfleet: ") and b"bytes of the log were not kept]\n" in rest
    assert rest.endswith(b"c09\n")


def test_last_lines_and_printable():
    assert nodelogs.last_lines(b"a\nb\nc\n", 2) == b"b\nc\n"
    assert nodelogs.last_lines(b"a\nb\nc", 1) == b"c"
    assert nodelogs.last_lines(b"a\n", 5) == b"a\n" and nodelogs.last_lines(b"a\n", 0) == b""
    assert nodelogs.printable("ok\t\n\x1b[2J\r\x9b") == "ok\t\n\\x1b[2J\\x0d\\x9b"
    assert nodelogs.decode(b"\xff\x1b") == "\\xff\\x1b"


def test_instance_ids_from_each_clouds_metadata(imds, gce, azure, monkeypatch):
    monkeypatch.delenv("SPOTFLEET_INSTANCE_ID", raising=False)
    assert instance_id("aws", url=imds.url) == "i-0123456789abcdef0"
    assert instance_id("gcp", url=gce.url) == "us-central1-a/spotfleet-node-1"
    assert instance_id("azure", url=azure.url) == azure.vm_name
    monkeypatch.setenv("CONTAINER_ID", "4242")
    assert instance_id("vast") == "4242" and instance_id("local") == ""
    monkeypatch.setenv("SPOTFLEET_INSTANCE_ID", "given")
    assert instance_id("aws", url=imds.url) == "given"
