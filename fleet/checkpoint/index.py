"""What is committed in a store: commit steps, their manifests and verified data (reads only)."""

from __future__ import annotations

import logging

from fleet.checkpoint.errors import CorruptCheckpointError
from fleet.checkpoint.layout import COMMIT_DIR, CheckpointInfo, Part, commit_key, committed_step
from fleet.checkpoint.sink import PlacedDownload, Plan, whole
from fleet.checkpoint.stores.base import ObjectStore

log = logging.getLogger("fleet.checkpoint")


def committed_steps(store: ObjectStore) -> list[int]:
    """Steps that have a commit object, newest first."""
    steps = {s for key in store.list(COMMIT_DIR) if (s := committed_step(key)) is not None}
    return sorted(steps, reverse=True)


def read_manifest(store: ObjectStore, step: int) -> CheckpointInfo | None:
    """The manifest of ``step``; None when it vanished (pruned) or is not a valid manifest."""
    raw = store.read(commit_key(step))
    if raw is None:
        return None
    try:
        info = CheckpointInfo.from_manifest(raw)
    except (ValueError, KeyError, TypeError, OverflowError) as err:
        log.warning("%s: ignoring step %d: unreadable manifest (%s)", store.uri, step, err)
        return None
    if info.step != step:
        log.warning("%s: ignoring step %d: its manifest is for step %d", store.uri, step, info.step)
        return None
    return info


def data_intact(store: ObjectStore, info: CheckpointInfo) -> bool:
    """Cheap validity check: every data object exists with its recorded size (no checksum)."""
    return all(store.size(part.key) == part.size for part in info.objects)


def fetch_verified(store: ObjectStore, part: Part) -> bytearray:
    """Download one data object; raises :class:`CorruptCheckpointError` when it is missing or its
    digest differs from the manifest's (hashed while it downloads)."""
    buffer = bytearray(part.size)
    fetch_placed(store, part, whole(buffer))
    return buffer


def fetch_placed(store: ObjectStore, part: Part, plan: Plan) -> None:
    """Download one data object into the regions ``plan`` chooses (see :mod:`fleet.checkpoint.sink`),
    hashing it on the way; raises :class:`CorruptCheckpointError` when it is missing, short or fails
    its digest check (the regions then hold unverified bytes)."""
    sink = PlacedDownload(part.size, part.digest, plan, name=part.key, algorithm=part.algorithm)
    try:
        if store.download(part.key, part.size, sink) is None:
            raise CorruptCheckpointError(f"data object {part.key} is missing")
        sink.verify()
    finally:
        sink.close()
