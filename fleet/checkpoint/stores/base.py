"""The object-store protocol every checkpoint backend implements, and its transfer settings.

Keys are relative to the store's prefix and use ``/`` separators. A backend promises:

- ``upload(key, payload)``: write the whole payload under ``key`` (overwriting), using
  multipart/parallel transfers for large payloads. A failed or interrupted upload may leave a
  partial object or none; it never leaves a partial object under a *commit* key because
  commits go through ``create``.
- ``create(key, data) -> bool``: atomically create a small object only if ``key`` is absent;
  ``False`` when it already exists. Two concurrent callers: exactly one gets ``True``.
- ``read(key) -> bytes | None``: a small object, None when absent.
- ``download(key, size, into=None) -> bytearray | None``: a large object into a fresh buffer of
  its recorded ``size``; None when absent; raises ``CorruptCheckpointError`` when the stored size
  differs. With ``into`` (a :class:`~fleet.checkpoint.sink.PlacedDownload`) the bytes are written
  to it instead (it places and hashes them) and ``into`` is returned.
- ``size(key) -> int | None``: the stored size, None when absent.
- ``list(prefix) -> list[str]``: keys under ``prefix``, sorted.
- ``delete(key)``: remove; absent is success.
- ``presign(key, seconds) -> str``: a URL that lets anyone who holds it GET that one object for
  ``seconds`` (S3 presigned URL, GCS V4 signed URL, Azure SAS, ``file://`` for a directory store).

Every other failure becomes :class:`~fleet.checkpoint.errors.CheckpointError` with a one-line
message naming the location and the vendor's error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from fleet.checkpoint.errors import CorruptCheckpointError
from fleet.checkpoint.payload import BufferWriter, Payload

MiB = 1024 * 1024


@dataclass(frozen=True)
class TransferSettings:
    """Part size and parallelism for large transfers (S3 multipart, GCS chunks, Azure blocks)."""

    part_size: int = 16 * MiB
    concurrency: int = 8


@runtime_checkable
class ObjectStore(Protocol):
    uri: str

    def upload(self, key: str, payload: Payload) -> None: ...

    def create(self, key: str, data: bytes) -> bool: ...

    def read(self, key: str) -> bytes | None: ...

    def download(self, key: str, size: int, into: Any = None) -> Any: ...

    def size(self, key: str) -> int | None: ...

    def list(self, prefix: str) -> list[str]: ...

    def delete(self, key: str) -> None: ...

    def presign(self, key: str, seconds: int) -> str: ...


@runtime_checkable
class HashesWhileWriting(Protocol):
    """A store that writes an object and computes its digest in one pass over the bytes (a
    local directory: each piece is hashed while it is in cache, then written), where hashing
    on another thread beside the upload would read every byte a second time."""

    def upload_hashed(self, key: str, payload: Payload, algorithm: str) -> str:
        """``upload`` that returns the payload's ``algorithm`` hex digest."""
        ...


@runtime_checkable
class ReleasesCache(Protocol):
    """A store whose written objects sit in this machine's page cache (a local directory)."""

    def release_cache(self, key: str) -> None:
        """Let the kernel drop ``key``'s cached pages (the object stays; best effort): a
        checkpoint about to be superseded, so the next save's writes reuse those pages instead
        of memory the kernel must find (on a VM that reports free memory to its host, memory
        touched anew faults through the host and made a 2 GB save 2-3x ``torch.save``, which
        overwrites its file in place)."""
        ...


def join(prefix: str, key: str) -> str:
    """``prefix`` + ``key`` with exactly one ``/`` between (no leading slash when prefix is empty)."""
    prefix = prefix.strip("/")
    return f"{prefix}/{key}" if prefix else key


def relative(prefix: str, full: str) -> str:
    prefix = prefix.strip("/")
    return full[len(prefix) + 1 :] if prefix else full


def download_sized(key: str, size: int, actual: int | None, fetch: Callable[[Any], Any], into: Any = None) -> Any:
    """``fetch`` an object of ``actual`` stored bytes into ``into`` (default a fresh buffer, which
    is returned), if it has the expected ``size``.

    None when the object is absent (``actual`` is None); :class:`CorruptCheckpointError` when its
    size differs from the recorded one.
    """
    if actual is None:
        return None
    if actual != size:
        raise CorruptCheckpointError(f"{key} holds {actual} bytes, expected {size}")
    if into is not None:
        fetch(into)
        return into
    out = BufferWriter(size)
    fetch(out)
    return out.buffer
