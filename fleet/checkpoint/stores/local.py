"""``file:///dir`` checkpoint store: a local or network-mounted directory.

Uploads write ``<key>.partial`` then fsync and rename, so a crash never leaves a truncated file
under the final name. ``create`` is a hard link of a fully written temporary file to the final
name: ``link(2)`` fails if the name exists, which makes the commit atomic and exclusive (a plain
rename would silently replace a concurrent writer's commit).

Links are never followed out of a location: a folder below the root (``data/``, ``commits/``)
that is a symbolic link is refused with a ``CheckpointError`` naming it (a save would write,
and pruning delete, wherever it points), and objects are opened with ``O_NOFOLLOW`` (an object
that is a link reads as corrupt). The root itself may be a link: it is what the user named.

Every ``write`` is checked for what it wrote (a short write is continued, never ignored), and a
full disk or quota is reported as such ("no space left on device: ... needs N bytes"), not as a
size mismatch found later. Keeping N checkpoints needs room for N + 1 while one is saved: the new
one is written before older ones are pruned.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from fleet.checkpoint import digest as digests
from fleet.checkpoint.errors import CheckpointError, CorruptCheckpointError
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.stores.base import MiB

log = logging.getLogger("fleet.checkpoint")

_BLOCK = 4 * MiB
_OUT_OF_ROOM = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file size limit exceeded",
}


class LocalStore:
    """Checkpoints under a directory (created on first write)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self.uri = f"file://{self.root}"

    def _path(self, key: str) -> Path:
        """``key`` under the root, once no folder between them is a link (nor ``..``)."""
        parts = key.split("/")
        if key.startswith("/") or ".." in parts:
            raise CheckpointError(f"{self.uri}: key {key[:80]!r} is outside the location")
        self._no_links(parts[:-1])
        return self.root / key

    def _no_links(self, folders: list[str]) -> None:
        here = self.root
        for name in folders:
            if not name:
                continue
            here = here / name
            if here.is_symlink():
                raise CheckpointError(
                    f"{self.uri}: {here.relative_to(self.root)}/ is a symbolic link (to "
                    f"{os.readlink(here)}); a checkpoint location never follows links out of "
                    "itself: make it a real folder"
                )

    def upload(self, key: str, payload: Payload) -> None:
        pending = self.begin_upload(key, payload.size)
        try:
            for piece in payload.blocks(4 * _BLOCK):  # straight from the payload's buffers
                write_all(pending.fd, piece)
        except OSError as err:
            pending.abort()
            raise self._write_error(key, err, payload.size) from err
        pending.finish(payload.size)

    def upload_hashed(self, key: str, payload: Payload, algorithm: str) -> str:
        """``upload`` that hashes each piece as it writes it (``write_hashed``); the digest."""
        pending = self.begin_upload(key, payload.size)
        hasher = digests.new(algorithm)
        try:
            write_hashed(pending.fd, payload.chunks, hasher)
        except OSError as err:
            pending.abort()
            raise self._write_error(key, err, payload.size) from err
        pending.finish(payload.size)
        return hasher.hexdigest()

    def release_cache(self, key: str) -> None:
        """``ReleasesCache``: ``posix_fadvise(DONTNEED)`` over the object (skipped where the
        platform has none; a missing or unreadable object is left alone)."""
        if not hasattr(os, "posix_fadvise"):
            return
        try:
            fd = os.open(self._path(key), os.O_RDONLY | _NOFOLLOW)
        except OSError:
            return
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError as err:
            log.debug("%s: could not release the cached pages of %s: %s", self.uri, key, err)
        finally:
            os.close(fd)

    def begin_upload(self, key: str, size: int = 0) -> PendingUpload:
        """``<key>.partial`` created for writing (``fd``): the first half of :meth:`upload`, for a
        writer that fills the file itself (a forked snapshot writer). ``finish`` makes it ``key``;
        ``size`` (expected bytes) only words a full-disk error."""
        final = self._path(key)
        tmp = final.with_name(f"{final.name}.partial")
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o666)
        except OSError as err:
            raise self._write_error(key, err, size) from err
        return PendingUpload(self, key, final, tmp, fd)

    def presign(self, key: str, seconds: int) -> str:
        """A ``file://`` URL of the object (a directory needs no signature; ``seconds`` is unused)."""
        return self._path(key).resolve().as_uri()

    def create(self, key: str, data: bytes) -> bool:
        final = self._path(key)
        tmp = final.with_name(f"{final.name}.{uuid.uuid4().hex}.partial")
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            with _create_nofollow(tmp) as f:
                write_all(f.fileno(), memoryview(data))
                os.fsync(f.fileno())
            try:
                os.link(tmp, final)
            except FileExistsError:
                return False
            finally:
                tmp.unlink(missing_ok=True)
            _fsync_dir(final.parent)
            return True
        except OSError as err:
            _remove(tmp)
            raise self._write_error(key, err, len(data), "commit") from err

    def _write_error(self, key: str, err: OSError, size: int, op: str = "write") -> CheckpointError:
        """One line naming the resource that ran out (disk space, quota, file size) when one did."""
        if err.errno in _OUT_OF_ROOM:
            return CheckpointError(
                f"{self.uri}: cannot {op} {key}: {_OUT_OF_ROOM[err.errno]} "
                f"(the checkpoint needs {size} bytes; keeping N checkpoints needs room "
                f"for N + 1 while saving)"
            )
        return CheckpointError(f"{self.uri}: cannot {op} {key}: {err.strerror or err}")

    def read(self, key: str) -> bytes | None:
        try:
            with _open_nofollow(self._path(key)) as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as err:
            raise self._read_error(key, err) from err

    def _read_error(self, key: str, err: OSError) -> CheckpointError:
        if err.errno == errno.ELOOP:
            return CorruptCheckpointError(f"{self.uri}: {key} is a symbolic link, not an object of this location")
        return CheckpointError(f"{self.uri}: cannot read {key}: {err.strerror or err}")

    def download(self, key: str, size: int, into: Any = None) -> Any:
        """The object in a fresh buffer, or read straight into ``into``'s windows (no copy)."""
        try:
            with _open_nofollow(self._path(key)) as f:
                actual = os.fstat(f.fileno()).st_size
                if actual != size:
                    raise CorruptCheckpointError(f"{key} holds {actual} bytes, expected {size}")
                if into is not None:
                    got = 0
                    while got < size:
                        with into.lock:
                            view = into.window(got, _BLOCK)
                            n = f.readinto(view)
                            if not n:
                                break
                            into.filled(got, n)
                        got += n
                    return into
                out = bytearray(size)
                view = memoryview(out)
                got = 0
                while got < size and (n := f.readinto(view[got : got + _BLOCK])):
                    got += n
                return out
        except FileNotFoundError:
            return None
        except OSError as err:
            raise self._read_error(key, err) from err

    def size(self, key: str) -> int | None:
        """The object's size; None when it is missing or is a link (not an object of the location)."""
        try:
            st = self._path(key).lstat()
        except FileNotFoundError:
            return None
        return None if stat.S_ISLNK(st.st_mode) else st.st_size

    def list(self, prefix: str) -> list[str]:
        """Keys under ``prefix``; none when its directory does not exist yet. A directory that
        cannot be read (permissions, a file where a directory should be, I/O errors) raises
        CheckpointError: it is never taken for an empty location."""
        folder = prefix[: prefix.rfind("/") + 1]
        self._no_links(folder.split("/"))
        directory = self.root / folder

        def refuse(err: OSError) -> None:
            if isinstance(err, FileNotFoundError):
                return  # not written yet, or removed while we walked: nothing there
            raise CheckpointError(
                f"{self.uri}: cannot list {err.filename or directory}: {err.strerror or err}"
            ) from err

        if directory.exists() and not directory.is_dir():
            refuse(NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(directory)))
        keys = [
            (Path(d) / f).relative_to(self.root).as_posix()
            for d, _, files in os.walk(directory, onerror=refuse)
            for f in files
        ]
        return sorted(k for k in keys if k.startswith(prefix))

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink(missing_ok=True)
        except OSError as err:
            raise CheckpointError(f"{self.uri}: cannot delete {key}: {err.strerror or err}") from err


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class PendingUpload:
    """An upload to a :class:`LocalStore` being written to ``fd`` (its ``<key>.partial`` file).

    Exactly one of ``finish`` (fsync, rename to the key, fsync the folder) and ``abort`` (close
    and remove the partial file) ends it; both close ``fd``.
    """

    def __init__(self, store: LocalStore, key: str, final: Path, tmp: Path, fd: int):
        self.store, self.key, self.final, self.tmp, self.fd = store, key, final, tmp, fd
        self._open = True

    def finish(self, size: int) -> None:
        """Make the ``size`` bytes written the object ``key``; raises ``CheckpointError``
        (a full disk named as such) after removing the partial file."""
        try:
            os.fsync(self.fd)
            self._close()
            os.replace(self.tmp, self.final)
            _fsync_dir(self.final.parent)
        except OSError as err:
            self.abort()
            raise self.failure(err, size) from err

    def failure(self, err: OSError, size: int) -> CheckpointError:
        """The one-line error for ``err`` met while writing it (a full disk named as such)."""
        return self.store._write_error(self.key, err, size)

    def abort(self) -> None:
        """Close and remove the partial file (best effort)."""
        self._close()
        _remove(self.tmp)

    def _close(self) -> None:
        if self._open:
            self._open = False
            with contextlib.suppress(OSError):
                os.close(self.fd)


def _open_nofollow(path: Path) -> BinaryIO:
    """``path`` opened for unbuffered reading; ``OSError(ELOOP)`` when it is a symbolic link."""
    return os.fdopen(os.open(path, os.O_RDONLY | _NOFOLLOW), "rb", buffering=0)


def _create_nofollow(path: Path) -> BinaryIO:
    """``path`` created (or truncated) for unbuffered writing, never through a symbolic link."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o666), "wb", buffering=0)


def _remove(path: Path) -> None:
    """Best-effort removal of a temporary file after a failed write (the write's error wins)."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


#: Bytes hashed then written at a time by ``write_hashed``: small enough to stay in cache
#: between the two.
HASHED_PIECE = 1024 * 1024


def write_hashed(fd: int, chunks: Sequence[memoryview], hasher: Any) -> int:
    """Write ``chunks`` to ``fd`` in order, each ``HASHED_PIECE`` hashed into ``hasher`` just
    before it is written; the bytes written. One pass over memory: hashing the whole payload on
    another thread while this one writes read every byte twice, and made a 1 GB save 3-4x
    slower on two cores. Uses only ``os.write`` and the hasher, so a forked snapshot child
    (``fleet.checkpoint.forked``) may call it."""
    size = 0
    for chunk in chunks:
        for lo in range(0, chunk.nbytes, HASHED_PIECE):
            piece = chunk[lo : lo + HASHED_PIECE]
            hasher.update(piece)
            write_all(fd, piece)
            size += piece.nbytes
    return size


def write_all(fd: int, data: memoryview) -> None:
    """Write every byte of ``data`` to ``fd``, continuing short writes; a write that makes no
    progress raises ``OSError(ENOSPC)`` (what a full device does after a partial write)."""
    data = data.cast("B")
    while data.nbytes:
        n = os.write(fd, data)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        data = data[n:]


def _fsync_dir(path: Path) -> None:
    """Persist a rename/link in ``path`` (no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)
