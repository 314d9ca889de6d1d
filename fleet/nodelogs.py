"""Node logs in a fleet's bucket: where the node agent puts them and how ``fleet logs`` reads them.

Layout, under the fleet's checkpoint URI (beside the wheels at ``_spotfleet/wheels/``)::

    _spotfleet/logs/<instance>.log     the node log (bootstrap, agent, job output): its last
                                       MAX_BYTES at most, as the node's uploader last saw it
    _spotfleet/logs/<instance>.json    what that upload holds: {"instance", "size" (bytes the node
                                       log had), "offset" (where the object starts in it),
                                       "length", "updated_at" (epoch s, the node's clock),
                                       "final" (the agent had exited)}

``<instance>`` is the provider's instance id, percent-encoded so that a GCP id (``zone/name``)
stays one key. The log object is written before its index, so an index never promises bytes
its object does not hold; a reader that catches the pair between the two writes (lengths
differ) reads both again. Everything here goes through the checkpoint store protocol
(:mod:`fleet.checkpoint.stores`), so it works the same on S3, GCS, Azure Blob and a directory.

Node logs are untrusted text: :func:`printable` escapes control characters before anything
from a log (or a provider's console) reaches a terminal.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from threading import Event
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from fleet.errors import FleetError

if TYPE_CHECKING:
    from pathlib import Path

    from fleet.checkpoint.stores import ObjectStore
    from fleet.state import FleetRecord, StateStore
    from providers.base import Provider

PREFIX = "_spotfleet/logs/"
#: The most of a node log one upload keeps (its tail).
MAX_BYTES = 8 * 1024 * 1024
_INDEX_MAX = 64 * 1024


#: The state-store event that records where a fleet's nodes write (their checkpoint URI).
BUCKET_EVENT = "node-bucket"


def record_bucket(store: StateStore, fleet: str, uri: str) -> None:
    """Record ``uri`` as the bucket ``fleet``'s nodes write to, when it differs from the last record."""
    if uri and uri != recorded_bucket(store, fleet):
        store.record_event(fleet, BUCKET_EVENT, detail={"checkpoint_uri": uri})


def recorded_bucket(store: StateStore, fleet: str) -> str:
    """The newest bucket recorded for ``fleet`` ("" when none was)."""
    for event in reversed(store.events(fleet, kinds=[BUCKET_EVENT])):
        uri = (event.detail or {}).get("checkpoint_uri")
        if isinstance(uri, str) and uri:
            return uri
    return ""


def fleet_bucket(store: StateStore, record: FleetRecord, local_cloud: Path) -> str:
    """Where ``record``'s nodes upload their logs: the bucket ``fleet up`` recorded, or on the
    local cloud (``local_cloud`` is its folder) the bucket it gives the fleet's nodes.
    Raises FleetError when there is none."""
    uri = recorded_bucket(store, record.name)
    if uri:
        return uri
    if record.backend in ("", "local"):
        from providers.local.cloud import LocalCloud
        from providers.local.nodes import checkpoint_uri

        if LocalCloud.exists(local_cloud):
            return checkpoint_uri(LocalCloud.open(local_cloud, time_scale=None, seed=None), record.name)
    raise FleetError(
        f"fleet {record.name!r} has no bucket on record, so its nodes upload no logs: set "
        "`checkpoint.provider` (s3, gcs or azure) in its spec and run `fleet up` again; "
        f"`fleet logs {record.name} INSTANCE --console` reads a provider's console meanwhile"
    )


def console_of(providers: Mapping[str, Provider], fleet: str, instance: str) -> tuple[str, str]:
    """(provider name, console text) of the fleet's instance ``instance``. Raises FleetError when
    no provider runs it for the fleet, or its provider keeps no console log."""
    from providers.base import ReadsConsole

    for name, provider in sorted(providers.items()):
        found = next((i for i in provider.list_instances(fleet) if i.id == instance), None)
        if found is None:
            continue
        if not isinstance(provider, ReadsConsole):
            raise FleetError(
                f"console output is not available for {name} instances in this version; "
                f"`fleet logs {fleet} {instance}` shows what its node uploaded"
            )
        return name, provider.console_output(found)
    raise FleetError(f"no instance {instance!r} in fleet {fleet!r} (`fleet status {fleet}` lists them)")


def log_key(instance_id: str) -> str:
    return f"{PREFIX}{quote(instance_id, safe='')}.log"


def index_key(instance_id: str) -> str:
    return f"{PREFIX}{quote(instance_id, safe='')}.json"


@dataclass(frozen=True)
class NodeLog:
    """One node's uploaded log, as its index describes it."""

    instance: str
    size: int  # bytes the node log had when uploaded
    offset: int  # where the uploaded object starts in the node log (> 0: the head was cut)
    length: int  # bytes in the uploaded object
    updated_at: float
    final: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def parse(cls, raw: bytes, instance: str) -> NodeLog | None:
        """The index in ``raw``; None when it is not one of ours (anyone who can write the bucket
        can put a file there: it is read as untrusted input)."""
        if len(raw) > _INDEX_MAX:
            return None
        try:
            doc = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(doc, dict) or doc.get("instance") != instance:
            return None
        ints = [doc.get(k) for k in ("size", "offset", "length")]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints):
            return None
        size, offset, length = ints
        updated = doc.get("updated_at")
        if offset + length != size or not isinstance(updated, (int, float)) or isinstance(updated, bool):
            return None
        return cls(instance, size, offset, length, float(updated), doc.get("final") is True)


def list_logs(store: ObjectStore) -> list[NodeLog]:
    """Every node log uploaded under ``store``, by instance id (unreadable indexes are skipped)."""
    out = []
    for key in store.list(PREFIX):
        name = key[len(PREFIX) :]
        if "/" in name or not name.endswith(".json"):
            continue
        instance = unquote(name[: -len(".json")])
        raw = store.read(key)
        meta = NodeLog.parse(raw, instance) if raw is not None else None
        if meta is not None:
            out.append(meta)
    return sorted(out, key=lambda m: m.instance)


def read_log(store: ObjectStore, instance: str, *, attempts: int = 5) -> tuple[NodeLog, bytes] | None:
    """The newest upload of ``instance``'s log and its index, consistent with each other; None
    when that node has uploaded nothing (or nothing readable)."""
    for _ in range(attempts):
        raw = store.read(index_key(instance))
        if raw is None:
            return None
        meta = NodeLog.parse(raw, instance)
        if meta is None:
            raise FleetError(
                f"the log index of {instance} ({index_key(instance)} in {store.uri}) is not one "
                "spotfleet wrote; delete it and the node's next upload replaces it"
            )
        data = store.read(log_key(instance))
        if data is not None and len(data) == meta.length:
            return meta, data
        time.sleep(0.2)  # caught between the two writes of an upload
    raise FleetError(f"the log of {instance} in {store.uri} keeps changing under the reader; try again")


def last_lines(data: bytes, n: int) -> bytes:
    """The last ``n`` lines of ``data`` (a final line without a newline counts)."""
    if n <= 0:
        return b""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    pos = end
    for _ in range(n):
        pos = data.rfind(b"\n", 0, pos)
        if pos < 0:
            return data
    return data[pos + 1 :]


def follow(store: ObjectStore, instance: str, *, since: int, stop: Event, interval: float = 2.0) -> Iterator[bytes]:
    """New bytes of ``instance``'s log past byte ``since`` of the node log, as uploads bring them,
    until ``stop`` is set or the node's agent has made its final upload. A stretch that was cut
    from the head before it was read is replaced by a one-line marker."""
    pos = since
    while not stop.is_set():
        got = read_log(store, instance)
        if got is not None:
            meta, data = got
            if meta.size < pos:  # the node log started over (a new agent)
                yield f"[spotfleet: the node log of {instance} started over]\n".encode()
                pos = 0
            if meta.offset > pos:
                yield f"[spotfleet: {meta.offset - pos} bytes of the log were not kept]\n".encode()
                pos = meta.offset
            if meta.size > pos:
                yield data[pos - meta.offset :]
                pos = meta.size
            if meta.final:
                return
        stop.wait(interval)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab escaped (``\\x1b``), so escape
    sequences in a node log or a console cannot drive the terminal that shows them. Carriage
    returns are escaped too (they could overwrite a line on screen)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def decode(data: bytes) -> str:
    """Log bytes as text for a terminal: undecodable bytes as ``\\xNN``, controls escaped."""
    return printable(data.decode("utf-8", errors="backslashreplace"))
