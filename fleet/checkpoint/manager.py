"""CheckpointManager: save (sync or async), keep the last N, resume from the newest valid one.

Contract:
- ``save(state, step)`` returns only after the checkpoint is committed (visible to readers,
  size and SHA-256 recorded) and older ones beyond ``keep_last`` are pruned. Pruning failures are
  logged, never raised: the checkpoint itself is safe.
- ``save_async(state, step)`` serialises (snapshots) ``state`` in the caller, so the caller may
  mutate its arrays as soon as it returns; the upload and commit run on a background thread. At
  most ``max_pending`` saves are in flight: a further call blocks until one finishes. Snapshot
  buffers are reused across saves, so the manager holds up to ``max_pending + 1`` state-sized
  buffers until ``close()``.
- ``wait()`` blocks until every async save issued so far is done and raises the first failure
  among them (each failure is raised once).
- Readers (``latest``, ``load_latest``, ``list``) see committed checkpoints only; ``load_latest``
  verifies size and SHA-256 and falls back to older ones past any corrupt or partial checkpoint.
  Storage errors (network, credentials) are raised, not skipped, so a transient failure never
  silently resumes from an older step.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from hashlib import sha256
from types import TracebackType
from typing import Any

import numpy as np

from fleet.checkpoint import codec
from fleet.checkpoint.commit import write_checkpoint
from fleet.checkpoint.errors import CheckpointError, CorruptCheckpointError
from fleet.checkpoint.index import committed_steps, data_intact, read_manifest
from fleet.checkpoint.layout import CheckpointInfo
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.retention import prune
from fleet.checkpoint.stores import SCHEMES, open_store
from fleet.checkpoint.stores.base import ObjectStore, TransferSettings

log = logging.getLogger("fleet.checkpoint")
URI_ENV = "SPOTFLEET_CHECKPOINT_URI"


class CheckpointManager:
    """Checkpoints of one job under one storage URI (see the module docstring for the contract)."""

    def __init__(self, uri: str | None = None, *, keep_last: int = 3, store: ObjectStore | None = None,
                 env: Mapping[str, str] | None = None, transfer: TransferSettings | None = None,
                 max_pending: int = 1):
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
            raise CheckpointError(f"keep_last must be a whole number >= 1, got {keep_last!r}")
        if max_pending < 1:
            raise CheckpointError(f"max_pending must be >= 1, got {max_pending!r}")
        if store is None:
            env = os.environ if env is None else env
            uri = uri or env.get(URI_ENV, "")
            if not uri:
                raise CheckpointError(f"no checkpoint location: pass a URI or set ${URI_ENV} ({SCHEMES})")
            store = open_store(uri, env=env, transfer=transfer)
        self.store = store
        self.uri = store.uri
        self.keep_last = keep_last
        self._uploader = ThreadPoolExecutor(1, thread_name_prefix="checkpoint-upload")
        self._hasher = ThreadPoolExecutor(1, thread_name_prefix="checkpoint-hash")
        self._slots = threading.BoundedSemaphore(max_pending)
        self._buffers = _BufferPool(keep=max_pending + 1)
        self._pending: list[Future[CheckpointInfo]] = []
        self._lock = threading.Lock()
        self._closed = False

    # -- writing -------------------------------------------------------------------------------

    def save(self, state: dict[str, Any], step: int) -> CheckpointInfo:
        """Serialise, upload, verify and commit ``state`` as ``step``; prune beyond ``keep_last``."""
        self._check(step)
        payload, buffer = self._snapshot(state)
        try:
            return self._commit(payload, step)
        finally:
            self._buffers.give(buffer)

    def save_async(self, state: dict[str, Any], step: int) -> Future[CheckpointInfo]:
        """Snapshot ``state`` now; upload and commit it in the background. See ``wait()``."""
        self._check(step)
        self._slots.acquire()
        try:
            payload, buffer = self._snapshot(state)
            future = self._uploader.submit(self._commit, payload, step)
        except BaseException:
            self._slots.release()
            raise

        def done(_: Future[CheckpointInfo]) -> None:
            self._buffers.give(buffer)
            self._slots.release()

        future.add_done_callback(done)
        with self._lock:
            self._pending.append(future)
        return future

    def wait(self) -> None:
        """Wait for every pending async save; raise the first failure among them."""
        with self._lock:
            pending, self._pending = self._pending, []
        errors = [err for f in pending if (err := f.exception()) is not None]
        if errors:
            raise errors[0]

    def _snapshot(self, state: dict[str, Any]) -> tuple[Payload, np.ndarray]:
        held: list[np.ndarray] = []

        def allocate(n: int) -> np.ndarray:
            held.append(self._buffers.take(n))
            return held[0]

        return codec.encode(state, allocate), held[0]

    def _commit(self, payload: Payload, step: int) -> CheckpointInfo:
        info = write_checkpoint(self.store, payload, step, self._hasher)
        try:
            removed = prune(self.store, self.keep_last)
            if removed:
                log.debug("%s: pruned steps %s", self.uri, removed)
        except CheckpointError as err:
            log.warning("%s: step %d committed, but pruning older checkpoints failed: %s",
                        self.uri, step, err)
        return info

    def _check(self, step: int) -> None:
        if self._closed:
            raise CheckpointError(f"{self.uri}: the checkpoint manager is closed")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise CheckpointError(f"step must be a whole number >= 0, got {step!r}")

    # -- reading -------------------------------------------------------------------------------

    def list(self) -> list[CheckpointInfo]:
        """Committed checkpoints with a readable manifest, oldest first (data not checked)."""
        infos = (read_manifest(self.store, s) for s in reversed(committed_steps(self.store)))
        return [i for i in infos if i is not None]

    def latest(self, *, verify: bool = False) -> CheckpointInfo | None:
        """The newest committed checkpoint whose data exists with the recorded size.

        With ``verify=True`` the data is also downloaded and its SHA-256 checked.
        """
        for info in self._candidates():
            if not verify:
                return info
            try:
                self._fetch(info)
                return info
            except CorruptCheckpointError as err:
                log.warning("%s: skipping step %d: %s", self.uri, info.step, err)
        return None

    def load(self, info: CheckpointInfo) -> dict[str, Any]:
        """The state saved in ``info``; raises :class:`CorruptCheckpointError` if it does not verify."""
        return codec.decode(self._fetch(info))

    def load_latest(self) -> tuple[dict[str, Any], CheckpointInfo] | None:
        """The newest checkpoint that verifies, with its info; None when there is none."""
        for info in self._candidates():
            try:
                return self.load(info), info
            except CorruptCheckpointError as err:
                log.warning("%s: skipping step %d: %s; falling back to an older checkpoint",
                            self.uri, info.step, err)
        return None

    def _candidates(self) -> Any:
        for step in committed_steps(self.store):
            info = read_manifest(self.store, step)
            if info is None:
                continue
            if data_intact(self.store, info):
                yield info
            else:
                log.warning("%s: skipping step %d: data object missing or truncated", self.uri, step)

    def _fetch(self, info: CheckpointInfo) -> bytearray:
        data = self.store.download(info.data_key, info.size)
        if data is None:
            raise CorruptCheckpointError(f"data object {info.data_key} is missing")
        if sha256(data).hexdigest() != info.sha256:
            raise CorruptCheckpointError(f"data object {info.data_key} fails its SHA-256 check")
        return data

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for pending saves (raising their failure), then stop the background threads."""
        if self._closed:
            return
        try:
            self.wait()
        finally:
            self._closed = True
            self._uploader.shutdown(wait=True)
            self._hasher.shutdown(wait=True)
            self._buffers.clear()

    def __enter__(self) -> CheckpointManager:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CheckpointManager({self.uri!r}, keep_last={self.keep_last})"


class _BufferPool:
    """Snapshot buffers kept for reuse: a repeated save copies into memory that is already
    mapped instead of page-faulting a fresh allocation (which costs about as much as the copy).
    Holds at most ``keep`` buffers; ``clear()`` releases them."""

    def __init__(self, keep: int):
        self._keep = keep
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def take(self, n: int) -> np.ndarray:
        with self._lock:
            for i, buf in enumerate(self._free):
                if n <= buf.size <= 2 * n:
                    return self._free.pop(i)
        return np.empty(n, np.uint8)

    def give(self, buf: np.ndarray) -> None:
        with self._lock:
            if len(self._free) < self._keep:
                self._free.append(buf)

    def clear(self) -> None:
        with self._lock:
            self._free.clear()
