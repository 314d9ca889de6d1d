"""CheckpointManager: save (sync or async), keep the last N, resume from the newest valid one.

Contract:
- ``save(state, step)`` returns only after the checkpoint is committed (visible to readers,
  size and checksum recorded) and older ones outside the retention policy are pruned. Pruning
  failures are logged, never raised: the checkpoint itself is safe. It first waits for pending
  async saves (so saves land in order); their failures were already reported and never stop it,
  which makes ``mgr.save(state, step)`` the whole final-save pattern.
- Saving a step that is already committed with the same content is a no-op returning the existing
  checkpoint (the final save after a periodic save of the same step); other content raises
  :class:`CheckpointExistsError`. Saving below the newest valid checkpoint of the location raises
  :class:`StaleStepError` before anything is written (a resume would never use it). Valid means
  the same for saving as for resuming: a newer step ``load_latest`` would skip (its data missing,
  truncated, failing its checksum or not a checkpoint) never blocks a save.
- ``step`` is any integral number >= 0 (``int``, ``numpy.int64``, ...), never a bool.
- ``save_async(state, step)`` snapshots ``state`` in the caller, so the caller may mutate its
  arrays as soon as it returns; the write, upload and commit run in the background. At most
  ``max_pending`` saves are in flight: a further call blocks until one finishes. The snapshot
  (``snapshot=``) is ``"fork"`` where supported (Linux) and every array is in host memory: a
  forked child writes the memory as it was at the call, copy-on-write, and the caller blocks
  only for the walk over the state and the ``fork()`` (:mod:`fleet.checkpoint.forked`);
  otherwise (``"copy"``, another platform, a GPU or pinned tensor) the state is copied into a snapshot
  buffer in the caller. Snapshot buffers are reused across saves, so a copying manager holds up
  to ``max_pending + 1`` state-sized buffers until ``close()``. Either way the bytes, the
  commit, retention and failure reporting are those of ``save``; ``last_snapshot`` says which
  snapshot the latest ``save_async`` took.
- After a fork snapshot's child exits, a background thread folds the process's fully resident
  memory back into huge pages, so the next fork copies far fewer page-table entries
  (:mod:`fleet.checkpoint.hugepages`; ``hugepages=False`` or ``SPOTFLEET_HUGEPAGES=0`` turns it
  off). ``save`` stops a running fold (it wants the CPU), ``wait`` lets it finish, ``last_fold``
  says what the latest one did.
- A failed background save is reported at once: logged at WARNING with its cause, ``healthy``
  turns False and ``error`` holds it until a later save succeeds, and the next ``save_async`` (or
  ``wait``/``close``) raises it. Each failure is raised once.
- ``wait()`` blocks until every async save issued so far is done (and a running fold) and
  raises the first failure not raised yet.
- Readers (``latest``, ``load_latest``, ``list``) see committed checkpoints only; ``load_latest``
  verifies size and checksum and falls back to older ones past any corrupt, partial or malformed
  checkpoint. Storage errors (network, credentials) are raised, not skipped, so a transient
  failure never silently resumes from an older step.
"""

from __future__ import annotations

import logging
import math
import operator
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any

import numpy as np

from fleet.checkpoint import codec, forked
from fleet.checkpoint import digest as digests
from fleet.checkpoint.commit import commit_parts, discard, new_token, same_objects, upload_part, write_checkpoint
from fleet.checkpoint.errors import CheckpointError, CheckpointExistsError, CorruptCheckpointError, StaleStepError
from fleet.checkpoint.hugepages import Compaction, Folder
from fleet.checkpoint.index import committed_steps, data_intact, fetch_placed, fetch_verified, read_manifest
from fleet.checkpoint.layout import CheckpointInfo, Part, data_key
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.retention import Retention, prune
from fleet.checkpoint.stores import SCHEMES, open_store
from fleet.checkpoint.stores.base import ObjectStore, ReleasesCache, TransferSettings
from fleet.checkpoint.stores.local import LocalStore, PendingUpload

log = logging.getLogger("fleet.checkpoint")
URI_ENV = "SPOTFLEET_CHECKPOINT_URI"
SNAPSHOTS = ("fork", "copy")


@dataclass(frozen=True)
class Snapshot:
    """How a ``save_async`` snapshotted its state: ``"fork"`` (``pid`` of the writing child) or
    ``"copy"`` (``pid`` None), and why a copy when fork was asked for."""

    mode: str
    pid: int | None = None
    reason: str = ""


class CheckpointManager:
    """Checkpoints of one job under one storage URI (see the module docstring for the contract).

    Retention: ``keep_last`` newest valid checkpoints, plus every ``keep_every``-th step and the
    ``keep_best`` best by ``metric`` (``mode`` "min" or "max") when set; see
    :mod:`fleet.checkpoint.retention`. ``snapshot`` is how ``save_async`` snapshots: ``"fork"``
    (the default; copy-on-write, falls back to a copy where it cannot) or ``"copy"``;
    ``hugepages`` folds memory into huge pages after each fork snapshot (see the module docstring).
    """

    def __init__(
        self,
        uri: str | None = None,
        *,
        keep_last: int = 3,
        store: ObjectStore | None = None,
        env: Mapping[str, str] | None = None,
        transfer: TransferSettings | None = None,
        max_pending: int = 1,
        keep_every: int = 0,
        keep_best: int = 0,
        metric: str = "",
        mode: str = "min",
        snapshot: str = "fork",
        hugepages: bool = True,
    ):
        self.retention = Retention(keep_last, keep_every, keep_best, metric, mode).check()
        if max_pending < 1:
            raise CheckpointError(f"max_pending must be >= 1, got {max_pending!r}")
        if snapshot not in SNAPSHOTS:
            raise CheckpointError(f"snapshot must be one of {', '.join(SNAPSHOTS)}, got {snapshot!r}")
        self.snapshot = snapshot
        self.last_snapshot: Snapshot | None = None
        self._folder = Folder() if hugepages and snapshot == "fork" else None
        if store is None:
            env = os.environ if env is None else env
            uri = uri or env.get(URI_ENV, "")
            if not uri:
                raise CheckpointError(f"no checkpoint location: pass a URI or set ${URI_ENV} ({SCHEMES})")
            store = open_store(uri, env=env, transfer=transfer)
        self.store = store
        self.uri = store.uri
        self._uploader = ThreadPoolExecutor(1, thread_name_prefix="checkpoint-upload")
        self._hasher = ThreadPoolExecutor(1, thread_name_prefix="checkpoint-hash")
        self._written: list[tuple[int, str]] = []  # (step, data key) this manager wrote, pages maybe cached
        self._slots = threading.BoundedSemaphore(max_pending)
        self._buffers = _BufferPool(keep=max_pending + 1)
        self._pending: list[Future[CheckpointInfo]] = []
        self._unraised: list[BaseException] = []  # failed background saves not raised to the caller yet
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def last_fold(self) -> Compaction | None:
        """What the latest finished huge-page fold did (None before the first, or when off)."""
        return self._folder.last if self._folder is not None else None

    @property
    def keep_last(self) -> int:
        return self.retention.keep_last

    @property
    def healthy(self) -> bool:
        """False from a failed save until a later save succeeds (``error`` says why)."""
        return self._error is None

    @property
    def error(self) -> BaseException | None:
        """The failure of the most recent save when it failed; None while healthy."""
        return self._error

    # -- writing -------------------------------------------------------------------------------

    def save(self, state: dict[str, Any], step: int, *, metrics: Mapping[str, float] | None = None) -> CheckpointInfo:
        """Serialise, upload, verify and commit ``state`` as ``step``; prune per the retention policy.

        Waits for pending async saves first; their failures (already reported) do not stop this
        save, and this save's own outcome replaces them (they are not raised later).
        """
        step, scores = self._check(step, metrics)
        self._drain()
        if self._folder is not None:
            self._folder.stop()  # this save wants the CPU (a notice's final save most of all)
        with self._lock:
            self._unraised.clear()
        # the caller waits, so its arrays cannot change meanwhile: stream them, no second copy
        return self._commit(codec.encode_views(state), step, scores)

    def save_async(
        self, state: dict[str, Any], step: int, *, metrics: Mapping[str, float] | None = None
    ) -> Future[CheckpointInfo]:
        """Snapshot ``state`` now; upload and commit it in the background. See ``wait()``.

        Raises the failure of an earlier background save that was not raised yet (nothing is
        saved then: the loop learns at once that checkpoints are not landing).
        """
        step, scores = self._check(step, metrics)
        self._raise_unraised()
        self._slots.acquire()
        job: forked.ForkedSave | None = None
        try:
            run, job, buffer = self._snapshot_for(codec.walk(state), step, scores)
            future = self._uploader.submit(self._commit_reporting, run, step)
        except BaseException:
            if job is not None:
                job.abandon()
                if self._folder is not None:
                    self._folder.release()
            self._slots.release()
            raise

        def done(_: Future[CheckpointInfo]) -> None:
            if buffer is not None:
                self._buffers.give(buffer)
            self._slots.release()

        future.add_done_callback(done)
        with self._lock:
            self._pending.append(future)
        return future

    def wait(self) -> None:
        """Wait for every pending async save (and a running fold); raise the first failure not raised yet."""
        self._drain()
        if self._folder is not None:
            self._folder.wait()
        self._raise_unraised()

    def _drain(self) -> None:
        """Wait for every pending async save (failures stay recorded, not raised)."""
        with self._lock:
            pending, self._pending = self._pending, []
        for future in pending:
            future.exception()

    def _raise_unraised(self) -> None:
        with self._lock:
            errors, self._unraised = self._unraised, []
        if errors:
            raise errors[0]

    def _snapshot_for(
        self, encoded: codec.Encoded, step: int, metrics: dict[str, float]
    ) -> tuple[Callable[[], CheckpointInfo], forked.ForkedSave | None, np.ndarray | None]:
        """Snapshot ``encoded`` by fork, else by copy; the background half of the save, the
        forked job and the snapshot buffer (whichever there is)."""
        why_copy = self._why_copy(encoded)
        if not why_copy:
            try:
                job = self._fork(encoded, step)
            except CheckpointError as err:  # the location cannot be written: fail in the background
                return partial(self._failed, err), None, None
            except OSError as err:  # fork or memfd refused (memory, process limits): copy instead
                why_copy = f"fork failed: {err.strerror or err}"
            else:
                self.last_snapshot = Snapshot("fork", job.pid)
                return partial(self._commit_forked, job, step, metrics), job, None
        payload, buffer = self._snapshot(encoded)
        self.last_snapshot = Snapshot("copy", reason=why_copy)
        return partial(self._commit, payload, step, metrics), None, buffer

    def _failed(self, err: BaseException) -> CheckpointInfo:
        self._error = err
        raise err

    def _why_copy(self, encoded: codec.Encoded) -> str:
        """Why this save_async copies instead of forking; "" when it forks."""
        if self.snapshot == "copy":
            return 'snapshot="copy"'
        if not forked.supported():
            return "fork snapshots need Linux"
        if encoded.off_host:
            return "the state holds arrays a forked child cannot read (GPU or pinned tensors)"
        return ""

    def _snapshot(self, encoded: codec.Encoded) -> tuple[Payload, np.ndarray]:
        held: list[np.ndarray] = []

        def allocate(n: int) -> np.ndarray:
            held.append(self._buffers.take(n))
            return held[0]

        return encoded.copy(allocate), held[0]

    def _fork(self, encoded: codec.Encoded, step: int) -> forked.ForkedSave:
        """Fork the child that writes ``encoded``: into the data object's partial file on a
        directory store, else into an in-memory file the background thread uploads."""
        payload = encoded.views()
        pending = (
            self.store.begin_upload(data_key(step, new_token()), payload.size)
            if isinstance(self.store, LocalStore)
            else None
        )
        if self._folder is not None:
            self._folder.hold()  # no fold while a child shares the pages
        try:
            return forked.ForkedSave(payload.chunks, payload.size, pending)
        except BaseException:
            if self._folder is not None:
                self._folder.release()
            if pending is not None:
                pending.abort()
            raise

    def _commit_forked(self, job: forked.ForkedSave, step: int, metrics: dict[str, float]) -> CheckpointInfo:
        """The background half of a fork snapshot: wait for the child, then commit what it wrote
        exactly as ``save`` commits (same checks, same manifest); then fold huge pages again."""
        try:
            return self._commit_child(job, step, metrics)
        finally:
            if self._folder is not None:  # the child is gone: refold what its copy-on-write split
                self._folder.release()

    def _commit_child(self, job: forked.ForkedSave, step: int, metrics: dict[str, float]) -> CheckpointInfo:
        pending = job.partial
        try:
            try:
                self._release_superseded(step)  # while the child writes: its new pages can reuse these
                written = job.wait()
            except forked.ChildWriteError as err:
                if isinstance(pending, PendingUpload):
                    raise pending.failure(err, job.size) from err
                raise CheckpointError(f"{self.uri}: the snapshot writer failed: {err.strerror or err}") from err
            if not isinstance(pending, PendingUpload):
                return self._commit(job.staged(), step, metrics)
        except BaseException as err:
            if isinstance(pending, PendingUpload):
                pending.abort()
            self._error = err
            raise
        finally:
            job.close()
        return self._commit_written(pending, written, step, metrics)

    def _commit_written(
        self, pending: PendingUpload, written: forked.Written, step: int, metrics: dict[str, float]
    ) -> CheckpointInfo:
        """Commit the data object a child wrote to ``pending`` (a directory store)."""

        def digest_of(algorithm: str) -> str:
            if algorithm == written.algorithm:
                return written.digest
            hasher = digests.new(algorithm)  # another algorithm (a format /1 manifest): read it back
            with open(pending.tmp, "rb", buffering=0) as f:
                while block := f.read(16 * 1024 * 1024):
                    hasher.update(block)
            return hasher.hexdigest()

        try:
            existing = self._existing(written.size, digest_of, step)
            if existing is not None:
                pending.abort()
                log.info("%s: step %d is already committed with this content; nothing to save", self.uri, step)
                self._error = None
                return existing
            pending.finish(written.size)
            stored = self.store.size(pending.key)
            if stored != written.size:
                discard(self.store, [pending.key], failing=True)
                raise CheckpointError(
                    f"{self.uri}: {pending.key} holds {stored} bytes after writing, expected {written.size}; not committed"
                )
            info = commit_parts(
                self.store, step, [Part(pending.key, written.size, written.digest, written.algorithm)], metrics
            )
        except BaseException as err:
            pending.abort()
            self._error = err
            raise
        self._error = None
        self._committed(info)
        return info

    def _commit_reporting(self, run: Callable[[], CheckpointInfo], step: int) -> CheckpointInfo:
        """A background save: report its failure at once (log, ``healthy``), keep it for raising."""
        try:
            return run()
        except BaseException as err:
            log.warning("%s: background save of step %d FAILED: %s", self.uri, step, err)
            with self._lock:
                self._unraised.append(err)
            raise

    def _commit(self, payload: Payload, step: int, metrics: dict[str, float]) -> CheckpointInfo:
        try:
            existing = self._existing(payload.size, payload.digest, step)
            if existing is None:
                self._release_superseded(step)
            info = existing or write_checkpoint(self.store, payload, step, self._hasher, metrics)
        except BaseException as err:
            self._error = err
            raise
        self._error = None
        if existing is not None:
            log.info("%s: step %d is already committed with this content; nothing to save", self.uri, step)
            return existing
        self._committed(info)
        return info

    def _release_superseded(self, step: int) -> None:
        """Before a save of ``step`` writes: the cached pages of the data this manager wrote for
        earlier steps go back to the kernel (``ReleasesCache``; the objects stay on disk,
        loadable as ever), so the new checkpoint's pages reuse them."""
        if not isinstance(self.store, ReleasesCache):
            return
        for written, key in self._written:
            if written < step:
                self.store.release_cache(key)
        self._written = [(w, k) for w, k in self._written if w >= step]

    def _committed(self, info: CheckpointInfo) -> None:
        self._written = [(info.step, part.key) for part in info.objects]
        self._prune(info.step)

    def upload_part(self, payload: Payload, step: int, token: str) -> Part:
        """One data object of a checkpoint of several (a rank's shard: ``fleet.checkpoint.distributed``
        and ``.dcp``), uploaded and checked but not committed (``commit_parts`` does that); as in
        ``save``, the pages of what this manager wrote for earlier steps are released first."""
        self._release_superseded(step)
        part = upload_part(self.store, payload, step, token, self._hasher)
        self._written.append((step, part.key))
        return part

    def _prune(self, step: int) -> None:
        try:
            removed = prune(self.store, self.retention)
            if removed:
                log.debug("%s: pruned steps %s", self.uri, removed)
        except CheckpointError as err:
            log.warning("%s: step %d committed, but pruning older checkpoints failed: %s", self.uri, step, err)

    # -- sharded saves (one data object per rank; see fleet.checkpoint.distributed) ---------------

    def check_fresh(self, step: Any) -> int:
        """``step`` as an int, before a sharded save writes anything; raises
        :class:`StaleStepError` when the location holds a newer valid checkpoint."""
        number, _ = self._check(step, None)
        for newer in committed_steps(self.store):
            if newer <= number:
                break
            info = read_manifest(self.store, newer)
            if info is not None and self._resumable(info):
                raise StaleStepError(self.uri, number, newer)
        return number

    def commit_parts(
        self, step: Any, parts: Sequence[Part], *, metrics: Mapping[str, float] | None = None
    ) -> CheckpointInfo:
        """Make data objects uploaded with :func:`fleet.checkpoint.commit.upload_part` (one per
        rank, first one first) visible as ``step`` with one manifest, then prune per the retention
        policy. Same rules as ``save``: identical contents of a committed step are a no-op."""
        number, scores = self._check(step, metrics)
        try:
            info = commit_parts(self.store, number, parts, scores)
        except BaseException as err:
            self._error = err
            raise
        self._error = None
        self._prune(number)
        return info

    def fetch_part(self, info: CheckpointInfo, index: int) -> bytearray:
        """Data object ``index`` of ``info`` (0 is the first), checksum verified; raises
        :class:`CorruptCheckpointError` when it is missing or does not verify."""
        objects = info.objects
        if not 0 <= index < len(objects):
            raise CorruptCheckpointError(f"step {info.step} has {len(objects)} data objects, not {index + 1}")
        return fetch_verified(self.store, objects[index])

    def fetch_placed(self, info: CheckpointInfo, index: int, regions: Sequence[tuple[int, Any]]) -> None:
        """Data object ``index`` of ``info`` read into ``regions`` (``(offset, writable buffer)``,
        ascending; other bytes are dropped), checksum verified on the way; raises
        :class:`CorruptCheckpointError` when it is missing or does not verify."""
        objects = info.objects
        if not 0 <= index < len(objects):
            raise CorruptCheckpointError(f"step {info.step} has {len(objects)} data objects, not {index + 1}")
        fetch_placed(self.store, objects[index], lambda _prefix: regions)

    def _existing(self, size: int, digest_of: Callable[[str], str], step: int) -> CheckpointInfo | None:
        """The committed checkpoint ``step`` when it holds this payload already (``size`` bytes,
        ``digest_of(algorithm)``); None when the step is free. Raises when a newer valid
        checkpoint exists or the step holds other content."""
        for newer in committed_steps(self.store):
            if newer < step:
                return None
            info = read_manifest(self.store, newer)
            if info is None:
                continue
            if newer == step:
                if same_objects(info, [Part("", size, digest_of(info.algorithm), info.algorithm)]):
                    return info
                raise CheckpointExistsError(self.uri, step, info.writer)
            if self._resumable(info):
                raise StaleStepError(self.uri, step, newer)
        return None

    def _resumable(self, info: CheckpointInfo) -> bool:
        """Whether ``load_latest`` would resume from ``info``, so a save below it is stale: its data
        objects are intact and a single-object checkpoint verifies and decodes (it is downloaded
        for that, which happens only when a save finds a newer step). A newer step that is not a
        checkpoint is skipped by both, with a warning."""
        if not data_intact(self.store, info):
            return False
        if info.parts:
            return True  # sharded: its own loaders verify it (``load`` refuses it)
        try:
            self.load(info)
        except CorruptCheckpointError as err:
            log.warning("%s: ignoring step %d above this save: %s (a resume skips it too)", self.uri, info.step, err)
            return False
        return True

    def _check(self, step: Any, metrics: Mapping[str, float] | None) -> tuple[int, dict[str, float]]:
        """``step`` as an int (numpy integers accepted) and ``metrics`` as finite floats."""
        if self._closed:
            raise CheckpointError(f"{self.uri}: the checkpoint manager is closed")
        try:
            number = -1 if isinstance(step, (bool, np.bool_)) else operator.index(step)
        except TypeError:
            number = -1
        if number < 0:
            raise CheckpointError(f"step must be a whole number >= 0, got {step!r}")
        scores: dict[str, float] = {}
        for name, value in (metrics or {}).items():
            try:
                scores[str(name)] = float(value)
            except (TypeError, ValueError):
                scores[str(name)] = math.nan
            if not math.isfinite(scores[str(name)]):
                raise CheckpointError(f"metrics[{name!r}] must be a finite number, got {value!r}")
        return number, scores

    # -- reading -------------------------------------------------------------------------------

    def list(self) -> list[CheckpointInfo]:
        """Committed checkpoints with a readable manifest, oldest first (data not checked)."""
        infos = (read_manifest(self.store, s) for s in reversed(committed_steps(self.store)))
        return [i for i in infos if i is not None]

    def latest(self, *, verify: bool = False) -> CheckpointInfo | None:
        """The newest committed checkpoint whose data exists with the recorded size.

        With ``verify=True`` every data object is also read and its checksum checked (streamed: no
        copy is kept), so the step returned is the one a loader would resume from.
        """
        for info in self.intact():
            if not verify:
                return info
            try:
                for part in info.objects:
                    fetch_placed(self.store, part, lambda _prefix: [])
                return info
            except CorruptCheckpointError as err:
                log.warning("%s: skipping step %d: %s", self.uri, info.step, err)
        return None

    def load(self, info: CheckpointInfo, *, place: Placer | None = None) -> dict[str, Any]:
        """The state saved in ``info``; raises :class:`CorruptCheckpointError` if it does not verify.

        The data is hashed while it downloads. ``place(layout)`` may choose where each blob of the
        checkpoint lands (a writable buffer of the blob's size per blob, e.g. the tensors of a load
        target; see :func:`fleet.checkpoint.tensors.Placement`), so nothing is read twice; when the
        checkpoint then fails its check those buffers hold unverified bytes.

        A sharded checkpoint (several data objects: a distributed or DCP save) is refused with a
        :class:`CheckpointError` naming the loaders that read it, never skipped as corrupt.
        """
        if info.parts:
            raise CheckpointError(
                f"{self.uri}: step {info.step} is a sharded checkpoint ({len(info.objects)} "
                "data objects); load it with fleet.checkpoint.torch.load from the same number "
                "of ranks, or fleet.checkpoint.dcp.StorageReader"
            )
        return load_object(self.store, info.objects[0], place)

    def load_latest(self, *, place: Placer | None = None) -> tuple[dict[str, Any], CheckpointInfo] | None:
        """The newest checkpoint that verifies, with its info; None when there is none."""
        for info in self.intact():
            try:
                return self.load(info, place=place), info
            except CorruptCheckpointError as err:
                log.warning("%s: skipping step %d: %s; falling back to an older checkpoint", self.uri, info.step, err)
        return None

    def intact(self) -> Iterator[CheckpointInfo]:
        """Committed checkpoints whose data objects all exist with their recorded sizes, newest
        first (lazily; no checksums)."""
        for step in committed_steps(self.store):
            info = read_manifest(self.store, step)
            if info is None:
                continue
            if data_intact(self.store, info):
                yield info
            else:
                log.warning("%s: skipping step %d: data object missing or truncated", self.uri, step)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for pending saves (raising their failure), then stop the background threads."""
        if self._closed:
            return
        try:
            self.wait()
        finally:
            self._closed = True
            if self._folder is not None:
                self._folder.close()
            self._uploader.shutdown(wait=True)
            self._hasher.shutdown(wait=True)
            self._buffers.clear()

    def __enter__(self) -> CheckpointManager:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CheckpointManager({self.uri!r}, keep_last={self.keep_last})"


Placer = Callable[[codec.Layout], Sequence[Any]]


def load_object(store: ObjectStore, part: Part, place: Placer | None = None) -> dict[str, Any]:
    """Decode one checkpoint object, downloading each blob into the buffer ``place`` picks (a
    fresh one per blob without it) and checking the checksum on the way."""
    chosen: dict[str, Any] = {}

    def plan(prefix: memoryview) -> list[tuple[int, Any]] | None:
        head = codec.head_length(prefix)
        if head is not None and head > part.size:
            raise CorruptCheckpointError(f"{part.key}: its header is longer than the object")
        if head is None or prefix.nbytes < head:
            return None
        layout = codec.parse_layout(prefix[:head], part.size)
        blobs = list(place(layout)) if place is not None else [np.empty(n, np.uint8) for _, n in layout.spans]
        chosen.update(layout=layout, blobs=blobs)
        return [(start, blob) for (start, _), blob in zip(layout.spans, blobs)]

    fetch_placed(store, part, plan)
    return codec.assemble(chosen["layout"], chosen["blobs"])


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
