"""``file:///dir`` checkpoint store: a local or network-mounted directory.

Uploads write ``<key>.partial`` then fsync and rename, so a crash never leaves a truncated file
under the final name. ``create`` is a hard link of a fully written temporary file to the final
name: ``link(2)`` fails if the name exists, which makes the commit atomic and exclusive (a plain
rename would silently replace a concurrent writer's commit).
"""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path

from fleet.checkpoint.errors import CheckpointError, CorruptCheckpointError
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.stores.base import MiB

_BLOCK = 4 * MiB


class LocalStore:
    """Checkpoints under a directory (created on first write)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self.uri = f"file://{self.root}"

    def _path(self, key: str) -> Path:
        return self.root / key

    def upload(self, key: str, payload: Payload) -> None:
        final = self._path(key)
        tmp = final.with_name(f"{final.name}.partial")
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            reader = payload.reader()
            block = bytearray(_BLOCK)
            with open(tmp, "wb", buffering=0) as f:
                while n := reader.readinto(block):
                    f.write(memoryview(block)[:n])
                os.fsync(f.fileno())
            os.replace(tmp, final)
            _fsync_dir(final.parent)
        except OSError as err:
            raise CheckpointError(f"{self.uri}: cannot write {key}: {err.strerror or err}") from err

    def create(self, key: str, data: bytes) -> bool:
        final = self._path(key)
        tmp = final.with_name(f"{final.name}.{uuid.uuid4().hex}.partial")
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
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
            raise CheckpointError(f"{self.uri}: cannot commit {key}: {err.strerror or err}") from err

    def read(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            raise CheckpointError(f"{self.uri}: cannot read {key}: {err.strerror or err}") from err

    def download(self, key: str, size: int) -> bytearray | None:
        try:
            with open(self._path(key), "rb", buffering=0) as f:
                actual = os.fstat(f.fileno()).st_size
                if actual != size:
                    raise CorruptCheckpointError(f"{key} holds {actual} bytes, expected {size}")
                out = bytearray(size)
                view = memoryview(out)
                got = 0
                while got < size and (n := f.readinto(view[got:got + _BLOCK])):
                    got += n
                return out
        except FileNotFoundError:
            return None
        except OSError as err:
            raise CheckpointError(f"{self.uri}: cannot read {key}: {err.strerror or err}") from err

    def size(self, key: str) -> int | None:
        try:
            return self._path(key).stat().st_size
        except FileNotFoundError:
            return None

    def list(self, prefix: str) -> list[str]:
        directory = self.root / prefix[:prefix.rfind("/") + 1]
        keys = [(Path(d) / f).relative_to(self.root).as_posix()
                for d, _, files in os.walk(directory) for f in files]
        return sorted(k for k in keys if k.startswith(prefix))

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink(missing_ok=True)
        except OSError as err:
            raise CheckpointError(f"{self.uri}: cannot delete {key}: {err.strerror or err}") from err


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
