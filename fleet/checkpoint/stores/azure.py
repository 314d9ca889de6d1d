"""``az://container/prefix`` checkpoint store (azure-storage-blob).

The storage account comes from ``AZURE_STORAGE_CONNECTION_STRING`` in ``env`` (Azurite's
well-known development string works the same way). Large transfers are staged blocks uploaded
in parallel (``max_concurrency``) and committed as one block list; downloads are parallel ranged
reads. The commit is an upload with ``overwrite=False`` (``If-None-Match: *``): the service
answers 409 BlobAlreadyExists to the second of two racing writers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient

from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.stores.base import TransferSettings, download_sized, join, relative


class AzureStore:
    """Checkpoints under ``az://container/prefix``."""

    def __init__(self, container: str, prefix: str, env: Mapping[str, str],
                 transfer: TransferSettings = TransferSettings()):
        self.prefix = prefix.strip("/")
        self.uri = f"az://{container}/{self.prefix}".rstrip("/")
        self.transfer = transfer
        conn = env.get("AZURE_STORAGE_CONNECTION_STRING")
        if not conn:
            raise CheckpointError(f"{self.uri}: az:// checkpoints need the storage account: set "
                                  "AZURE_STORAGE_CONNECTION_STRING")
        try:
            service = BlobServiceClient.from_connection_string(
                conn, max_single_put_size=transfer.part_size, max_block_size=transfer.part_size,
                max_single_get_size=transfer.part_size, max_chunk_get_size=transfer.part_size)
        except ValueError as err:
            raise CheckpointError(f"{self.uri}: AZURE_STORAGE_CONNECTION_STRING is not valid: {err}") from err
        self.container = service.get_container_client(container)

    @contextmanager
    def _errors(self, op: str, key: str) -> Iterator[None]:
        try:
            yield
        except ResourceNotFoundError as err:
            if getattr(err, "error_code", "") == "ContainerNotFound":
                raise CheckpointError(f"{self.uri}: container does not exist; create it (fleet up "
                                      "creates the fleet's container) or fix the URI") from err
            raise
        except ResourceExistsError:
            raise
        except AzureError as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise CheckpointError(f"{self.uri}: cannot {op} {key}: {first}") from err

    def upload(self, key: str, payload: Payload) -> None:
        with self._errors("upload", key):
            self.container.upload_blob(join(self.prefix, key), payload.reader(), length=payload.size,
                                       overwrite=True, max_concurrency=self.transfer.concurrency)

    def create(self, key: str, data: bytes) -> bool:
        try:
            with self._errors("commit", key):
                self.container.upload_blob(join(self.prefix, key), data, overwrite=False)
            return True
        except ResourceExistsError:
            return False

    def read(self, key: str) -> bytes | None:
        try:
            with self._errors("read", key):
                return self.container.download_blob(join(self.prefix, key)).readall()
        except ResourceNotFoundError:
            return None

    def download(self, key: str, size: int) -> bytearray | None:
        try:
            with self._errors("download", key):
                stream = self.container.download_blob(join(self.prefix, key),
                                                      max_concurrency=self.transfer.concurrency)
                return download_sized(key, size, stream.size, stream.readinto)
        except ResourceNotFoundError:
            return None

    def size(self, key: str) -> int | None:
        try:
            with self._errors("inspect", key):
                return int(self.container.get_blob_client(join(self.prefix, key)).get_blob_properties().size)
        except ResourceNotFoundError:
            return None

    def list(self, prefix: str) -> list[str]:
        with self._errors("list", prefix):
            names = self.container.list_blob_names(name_starts_with=join(self.prefix, prefix))
            return sorted(relative(self.prefix, n) for n in names)

    def delete(self, key: str) -> None:
        try:
            with self._errors("delete", key):
                self.container.delete_blob(join(self.prefix, key))
        except ResourceNotFoundError:
            pass
