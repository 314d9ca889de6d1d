"""The write path of one checkpoint: upload under a unique name, verify, then commit.

Protocol (every store): upload the payload to ``data/step-N-<token>.ckpt`` (a name no other
writer uses) while its SHA-256 is computed alongside; check the stored size; then create
``commits/step-N.json`` only if absent. Until that create succeeds no reader can see the
checkpoint, so a crash at any earlier point leaves only an orphan that pruning removes later.
When the commit already exists with the very content just uploaded (a retried or repeated save
of the same state), the existing checkpoint is the result and the duplicate data is removed.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from concurrent.futures import Executor

from fleet.checkpoint.errors import CheckpointError, CheckpointExistsError
from fleet.checkpoint.index import read_manifest
from fleet.checkpoint.layout import CheckpointInfo, commit_key, data_key, step_name
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.stores.base import ObjectStore

log = logging.getLogger("fleet.checkpoint")
WRITER = f"{socket.gethostname()}:{os.getpid()}"


def write_checkpoint(store: ObjectStore, payload: Payload, step: int, hasher: Executor,
                     metrics: dict[str, float] | None = None) -> CheckpointInfo:
    """Upload, verify and commit ``payload`` as ``step``; returns the committed info.

    Raises :class:`CheckpointExistsError` when ``step`` was committed first with other content
    (this writer's data is removed), :class:`CheckpointError` when storage fails. If the commit
    request itself fails ambiguously the data is kept: the commit may have landed.
    """
    key = data_key(step, uuid.uuid4().hex[:16])
    digest = hasher.submit(payload.sha256)
    try:
        store.upload(key, payload)
        stored = store.size(key)
        if stored != payload.size:
            raise CheckpointError(f"{store.uri}: {key} holds {stored} bytes after upload, "
                                  f"expected {payload.size}; not committed")
        info = CheckpointInfo(step=step, name=step_name(step), size=payload.size, sha256=digest.result(),
                              committed_at=time.time(), data_key=key, writer=WRITER, metrics=dict(metrics or {}))
    except BaseException:
        _discard(store, key, failing=True)
        raise
    if not store.create(commit_key(step), info.to_manifest()):
        _discard(store, key)
        existing = read_manifest(store, step)
        if existing is not None and same_content(existing, info.size, info.sha256):
            return existing
        raise CheckpointExistsError(store.uri, step, existing.writer if existing is not None else "")
    return info


def same_content(info: CheckpointInfo, size: int, sha256: str) -> bool:
    """Whether the committed checkpoint ``info`` holds exactly these bytes."""
    return info.size == size and info.sha256 == sha256


def _discard(store: ObjectStore, key: str, *, failing: bool = False) -> None:
    """Remove uncommitted data, best effort (pruning removes orphans later). While a failure is
    on its way up, a cleanup failure (usually the same cause) is only a debug note, so the log
    shows the real cause first."""
    try:
        store.delete(key)
    except Exception as err:
        (log.debug if failing else log.warning)("%s: could not remove uncommitted %s: %s", store.uri, key, err)
