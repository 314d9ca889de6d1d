"""Copy-on-write snapshots for ``save_async``: a forked child writes the state's bytes.

A background save must store the values of the call even when training changes its arrays
right after the call returns. Instead of copying the state in the caller (what the ``"copy"``
snapshot does, :func:`fleet.checkpoint.codec.encode`), :class:`ForkedWriter` forks the process,
as Redis' ``BGSAVE`` does: the child sees the memory as it was at the fork (the kernel copies a
page only when the parent later writes to it) and writes the payload; the caller blocks for the
walk over the state (views, no copy) and the ``fork()`` (page tables only).

Where the child writes (:class:`ForkedSave`):

- a directory store: straight into the data object's ``<key>.partial`` file, the same bytes a
  synchronous save writes; the parent's background thread then fsyncs, renames and commits;
- any other store: into an anonymous in-memory file (``memfd``), which the parent's background
  thread then uploads as an ordinary payload. The child never talks to a cloud SDK: an SDK's
  connection pools, locks and TLS sessions belong to threads that do not exist in the child.

Fork-safety contract (what the child may do, checked by review, not by the interpreter):

- The parent may have many threads (torch intra-op pools, this library's executors, the user's).
  Only the forking thread exists in the child; any lock another thread held at the fork stays
  held forever there. So the child runs only: memoryview slicing of buffers built before the
  fork, ``os.write``, the ``xxhash`` hash object (no locks) and ``json.dumps`` of a
  small dict. No torch or numpy operations, no thread pools, no logging, no ``print``, no imports
  (the import lock), no big allocations (the child's memory is the parent's, shared until written).
- CPython (3.11) takes the import lock around ``os.fork`` and, in the child, re-initialises the
  GIL (held by the forking thread, which is the child's only thread), the interpreter's other
  locks and the ``threading`` module; glibc's ``malloc`` has at-fork handlers of its own. At-fork
  hooks registered by libraries run in the child too (``random`` reseeds, ``logging`` resets its
  handler locks; torch registers its own for its thread pools and CUDA). A process that has
  initialised CUDA may fork: the child never calls CUDA, and states holding GPU or pinned tensors
  never take this path (their memory is not inherited).
- Garbage collection is disabled from just before the fork in the child, so no finalizer of an
  object the parent owns (a socket, a TLS session, a temporary file) runs in the child.
- Every blockable signal is blocked in the child: a SIGTERM or Ctrl-C sent to the process group
  (a spot notice, a user) reaches the parent, which decides; the write finishes or the child is
  killed (SIGKILL). The parent's Python signal handlers never run in the child.
- The child always ends with ``os._exit``: no ``atexit`` handlers, no flushing of buffers the
  parent also owns. It reports ``{"size", "digest", "algorithm"}`` or ``{"error", "errno"}`` as
  one small JSON message on a pipe (well within the pipe's buffer: the write never blocks, and
  the parent reads it once the child has exited). The parent fsyncs and commits.
- The parent reaps the child (``waitpid``) on its background thread, so no zombie outlives a
  save; a child killed by a signal, one that exits without a report, or a report of an error
  fails the save like any failed background save, and nothing is committed.
- If the parent dies first, the child finishes its write and exits; the ``.partial`` file it
  leaves is never committed (no manifest names it) and pruning removes it later.

Memory: the parent's writes to the state while the child runs copy the pages it touches (4 KiB
each; a transparent huge page is split first): at most one more copy of the state, only of what
changes, and only until the child exits.
"""

from __future__ import annotations

import errno
import gc
import json
import mmap
import os
import signal
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from fleet.checkpoint import digest as digests
from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.stores.local import write_hashed

# Python 3.12+ warns at every fork of a process with threads; this module's child is written for
# exactly that case (the contract above), so the warning is silenced for its own fork only
warnings.filterwarnings("ignore", r".*multi-threaded.*fork", DeprecationWarning, __name__)

_REPORT_MAX = 3500  # characters of error text: the report stays far below the pipe's 64 KiB


def supported() -> bool:
    """Whether this platform can snapshot by fork: Linux (``fork`` and ``memfd_create``)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(os, "memfd_create")


@dataclass(frozen=True)
class Written:
    """What a child wrote: its byte count and digest."""

    size: int
    digest: str
    algorithm: str


class ChildWriteError(OSError):
    """The child's write failed with an OS error (``errno`` kept, e.g. ENOSPC)."""


class ForkedWriter:
    """A forked child writing ``chunks`` to ``fd``; :meth:`wait` reaps it and returns what it wrote."""

    def __init__(self, pid: int, report: int):
        self.pid, self._report = pid, report
        self._reaped = False

    @classmethod
    def start(cls, chunks: Sequence[memoryview], fd: int) -> ForkedWriter:
        read_end, write_end = os.pipe()
        collecting = gc.isenabled()
        gc.disable()  # the child starts (and stays) without garbage collection
        try:
            pid = os.fork()
        except BaseException:
            if collecting:
                gc.enable()
            os.close(read_end)
            os.close(write_end)
            raise
        if pid == 0:  # the child: never returns
            try:
                _child(chunks, fd, write_end)
            finally:
                os._exit(70)
        if collecting:
            gc.enable()
        os.close(write_end)
        return cls(pid, read_end)

    def wait(self) -> Written:
        """Reap the child; what it wrote, or :class:`CheckpointError` (killed, failed, silent)."""
        try:
            status = self._reap()
            message = self._read()
        finally:
            os.close(self._report)
        what = f"the snapshot writer (pid {self.pid})"
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            raise CheckpointError(f"{what} was killed by {name} before it finished writing; not committed")
        try:
            report = json.loads(message) if message else {}
        except ValueError:
            report = {}
        if "error" in report:
            err = report.get("errno")
            if isinstance(err, int):
                raise ChildWriteError(err, str(report["error"]))
            raise CheckpointError(f"{what} failed: {report['error']}; not committed")
        if status is not None and os.WEXITSTATUS(status) != 0 or "digest" not in report:
            code = os.WEXITSTATUS(status) if status is not None else "unknown"
            raise CheckpointError(f"{what} exited (status {code}) without reporting its write; not committed")
        return Written(int(report["size"]), str(report["digest"]), str(report["algorithm"]))

    def kill(self) -> None:
        """Stop the child and reap it (a save abandoned before its background thread started)."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self._reap()
        finally:
            os.close(self._report)

    def _reap(self) -> int | None:
        """The child's wait status; None when someone else reaped it (SIGCHLD ignored, or a
        ``waitpid(-1)`` elsewhere): its report then decides."""
        if self._reaped:
            return None
        self._reaped = True
        try:
            return os.waitpid(self.pid, 0)[1]
        except ChildProcessError:
            return None

    def _read(self) -> bytes:
        """The child's report. After the child exited it is in the pipe already; read without
        blocking, so a write end inherited by another process (a fork elsewhere) cannot hang us."""
        os.set_blocking(self._report, False)
        out = b""
        while True:
            try:
                data = os.read(self._report, 65536)
            except BlockingIOError:
                return out
            if not data:
                return out
            out += data


def _child(chunks: Sequence[memoryview], fd: int, report: int) -> NoReturn:
    """The child's whole life: write, hash, report, ``_exit`` (see the module contract)."""
    code = 1
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        hasher = digests.new(digests.DEFAULT)
        size = write_hashed(fd, chunks, hasher)
        message: dict[str, object] = {"size": size, "digest": hasher.hexdigest(), "algorithm": digests.DEFAULT}
        code = 0
    except BaseException as err:  # reported, never raised: there is no caller here
        message = {"error": f"{type(err).__name__}: {err}"[:_REPORT_MAX], "errno": getattr(err, "errno", None)}
        if isinstance(err, OSError):
            message["error"] = (err.strerror or str(err))[:_REPORT_MAX]
    try:
        os.write(report, json.dumps(message).encode())
    finally:
        os._exit(code)


class ForkedSave:
    """One ``save_async`` snapshotted by fork: the child writes, the parent finishes.

    ``chunks`` are views of the caller's buffers (:func:`fleet.checkpoint.codec.encode_views`),
    valid in the child whatever the parent does next. ``partial`` is the open ``.partial`` file
    of a directory store (``PendingUpload``) or None for any other store (the child then writes
    an in-memory file, returned by :meth:`staged` for upload).
    """

    def __init__(self, chunks: Sequence[memoryview], size: int, partial: object | None):
        self.size, self.partial = size, partial
        fd = getattr(partial, "fd", None)
        self._memfd = -1
        if fd is None:
            self._memfd = fd = os.memfd_create("spotfleet-checkpoint", os.MFD_CLOEXEC)
        try:
            self.writer = ForkedWriter.start(chunks, fd)
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return self.writer.pid

    def wait(self) -> Written:
        """Wait for the child; what it wrote (its size checked against the payload's)."""
        written = self.writer.wait()
        if written.size != self.size:
            raise CheckpointError(
                f"the snapshot writer wrote {written.size} bytes, expected {self.size}; not committed"
            )
        return written

    def staged(self) -> Payload:
        """The child's in-memory file as a payload (other stores, after :meth:`wait`)."""
        mapped = mmap.mmap(self._memfd, self.size, prot=mmap.PROT_READ)
        self._close_memfd()
        return Payload.of([memoryview(mapped)])

    def close(self) -> None:
        """Release the in-memory file (its memory goes once the last view of it is dropped)."""
        self._close_memfd()

    def abandon(self) -> None:
        """Kill and reap the child, remove what it wrote (the save never reached its thread)."""
        try:
            self.writer.kill()
        finally:
            self.close()
            abort = getattr(self.partial, "abort", None)
            if abort is not None:
                abort()

    def _close_memfd(self) -> None:
        if self._memfd >= 0:
            fd, self._memfd = self._memfd, -1
            try:
                os.close(fd)
            except OSError as err:
                if err.errno != errno.EBADF:
                    raise
