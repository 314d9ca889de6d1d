"""The write path of one checkpoint: upload under a unique name, verify, then commit.

Protocol (every store): upload the payload to ``data/step-N-<token>.ckpt`` (a name no other
writer uses) while its digest (:mod:`fleet.checkpoint.digest`) is computed alongside; check the stored size; then create
``commits/step-N.json`` only if absent. Until that create succeeds no reader can see the
checkpoint, so a crash at any earlier point leaves only an orphan that pruning removes later.
When the commit already exists with the very content just uploaded (a retried or repeated save
of the same state), the existing checkpoint is the result and the duplicate data is removed.

A sharded checkpoint uses the same two halves apart: every writer (rank) runs ``upload_part`` for
its own object, and once all of them have succeeded one writer runs ``commit_parts`` with the
whole list. A writer that dies before that leaves only orphans; the step never becomes visible.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor

from fleet.checkpoint import digest as digests
from fleet.checkpoint.errors import CheckpointError, CheckpointExistsError
from fleet.checkpoint.index import read_manifest
from fleet.checkpoint.layout import CheckpointInfo, Part, commit_key, data_key, step_name
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.stores.base import HashesWhileWriting, ObjectStore

log = logging.getLogger("fleet.checkpoint")
WRITER = f"{socket.gethostname()}:{os.getpid()}"


def write_checkpoint(
    store: ObjectStore, payload: Payload, step: int, hasher: Executor, metrics: dict[str, float] | None = None
) -> CheckpointInfo:
    """Upload, verify and commit ``payload`` as ``step``; returns the committed info.

    Raises :class:`CheckpointExistsError` when ``step`` was committed first with other content
    (this writer's data is removed), :class:`CheckpointError` when storage fails. If the commit
    request itself fails ambiguously the data is kept: the commit may have landed.
    """
    part = upload_part(store, payload, step, new_token(), hasher)
    return commit_parts(store, step, [part], metrics)


def new_token() -> str:
    """A data-object token no other writer uses."""
    return uuid.uuid4().hex[:16]


def upload_part(store: ObjectStore, payload: Payload, step: int, token: str, hasher: Executor | None = None) -> Part:
    """Upload ``payload`` to ``data/step-N-<token>.ckpt`` and check its stored size; nothing is
    committed. Its digest (the default algorithm) is computed while writing where the store can
    (``HashesWhileWriting``), else alongside the upload (on ``hasher``, else a thread of its own). On failure the partial object is removed (best effort) and the error raised."""
    if hasher is None:
        with ThreadPoolExecutor(1, thread_name_prefix="checkpoint-hash") as own:
            return upload_part(store, payload, step, token, own)
    key = data_key(step, token)
    try:
        if isinstance(store, HashesWhileWriting):
            digest = store.upload_hashed(key, payload, digests.DEFAULT)
        else:
            pending = hasher.submit(payload.digest, digests.DEFAULT)
            store.upload(key, payload)
            digest = pending.result()
        stored = store.size(key)
        if stored != payload.size:
            raise CheckpointError(
                f"{store.uri}: {key} holds {stored} bytes after upload, expected {payload.size}; not committed"
            )
        return Part(key, payload.size, digest, digests.DEFAULT)
    except BaseException:
        discard(store, [key], failing=True)
        raise


def commit_parts(
    store: ObjectStore, step: int, parts: Sequence[Part], metrics: dict[str, float] | None = None
) -> CheckpointInfo:
    """Make the uploaded ``parts`` (first one first) visible as ``step`` with one create-if-absent
    manifest. When the step is already committed with exactly these contents the existing info is
    returned and this writer's data removed; other contents raise :class:`CheckpointExistsError`."""
    first, rest = parts[0], tuple(parts[1:])
    info = CheckpointInfo(
        step=step,
        name=step_name(step),
        size=first.size,
        digest=first.digest,
        committed_at=time.time(),
        data_key=first.key,
        writer=WRITER,
        metrics=dict(metrics or {}),
        parts=rest,
        algorithm=first.algorithm,
    )
    try:
        manifest = info.to_manifest()
    except ValueError as err:  # parts hashed by different versions of this library
        discard(store, [p.key for p in parts], failing=True)
        raise CheckpointError(f"{store.uri}: step {step} not committed: {err}") from err
    if not store.create(commit_key(step), manifest):
        existing = read_manifest(store, step)
        # this writer's data goes, except objects the committed manifest names (a retry of the
        # same commit whose first try landed: its data is the committed checkpoint's)
        kept = {o.key for o in existing.objects} if existing is not None else set()
        discard(store, [p.key for p in parts if p.key not in kept])
        if existing is not None and same_objects(existing, parts):
            return existing
        raise CheckpointExistsError(store.uri, step, existing.writer if existing is not None else "")
    return info


def same_objects(info: CheckpointInfo, parts: Sequence[Part]) -> bool:
    """Whether the committed checkpoint ``info`` holds exactly the contents of ``parts`` (same sizes
    and digests; digests of another algorithm never match)."""

    def key(p: Part) -> tuple[int, str, str]:
        return p.size, p.algorithm, p.digest

    return [key(p) for p in info.objects] == [key(p) for p in parts]


def discard(store: ObjectStore, keys: Sequence[str], *, failing: bool = False) -> None:
    """Remove uncommitted data, best effort (pruning removes orphans later). While a failure is
    on its way up, a cleanup failure (usually the same cause) is only a debug note, so the log
    shows the real cause first."""
    for key in keys:
        try:
            store.delete(key)
        except Exception as err:
            (log.debug if failing else log.warning)("%s: could not remove uncommitted %s: %s", store.uri, key, err)
