"""``az://container/prefix`` and ``az://container@account/prefix`` checkpoint store (azure-storage-blob).

Which account, and how it is reached:

* ``az://container@account/...`` (what ``fleet up`` hands Azure nodes): the account's Blob endpoint,
  ``https://<account>.blob.core.windows.net`` (``$SPOTFLEET_AZURE_BLOB_ENDPOINT`` replaces it: a
  URL in which ``{account}`` is replaced, or to which ``/<account>`` is appended, as Azurite
  serves accounts), with ``azure.identity.DefaultAzureCredential``: on a node, the VM's managed
  identity (``$AZURE_CLIENT_ID`` names it), elsewhere ``az login`` or a service principal. When
  ``AZURE_STORAGE_CONNECTION_STRING`` is set for that same account, the string is used instead.
* ``az://container/...``: the account of ``AZURE_STORAGE_CONNECTION_STRING`` (Azurite's well-known
  development string works the same way), or, without one, ``$AZURE_STORAGE_ACCOUNT`` with the
  credential as above.

Large transfers are staged blocks uploaded in parallel (``max_concurrency``) and committed as one
block list; downloads are parallel ranged reads. The commit is an upload with ``overwrite=False``
(``If-None-Match: *``): the service answers 409 BlobAlreadyExists to the second of two racing writers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import BlobSasPermissions, BlobServiceClient, generate_blob_sas

from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.stores.base import TransferSettings, download_sized, join, relative

CONNECTION_ENV = "AZURE_STORAGE_CONNECTION_STRING"
ACCOUNT_ENV = "AZURE_STORAGE_ACCOUNT"
ENDPOINT_ENV = "SPOTFLEET_AZURE_BLOB_ENDPOINT"


def account_url(account: str, env: Mapping[str, str]) -> str:
    """The Blob endpoint of ``account`` (public cloud, or the ``$SPOTFLEET_AZURE_BLOB_ENDPOINT`` override)."""
    override = env.get(ENDPOINT_ENV, "").rstrip("/")
    if not override:
        return f"https://{account}.blob.core.windows.net"
    return override.replace("{account}", account) if "{account}" in override else f"{override}/{account}"


def _conn_account(conn: str) -> str:
    """The AccountName of a connection string ("" when it has none)."""
    match = re.search(r"(?:^|;)\s*AccountName=([^;]+)", conn, re.I)
    return match.group(1).strip().lower() if match else ""


def _credential(env: Mapping[str, str]) -> Any:
    """DefaultAzureCredential, told the managed identity of ``$AZURE_CLIENT_ID`` when ``env`` names one."""
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError as err:
        raise CheckpointError(
            "az://container@account checkpoints sign in with azure-identity: pip install 'spotfleet[azure]'"
        ) from err
    client_id = env.get("AZURE_CLIENT_ID") or None
    return DefaultAzureCredential(managed_identity_client_id=client_id)


class AzureStore:
    """Checkpoints under ``az://container[@account]/prefix``."""

    def __init__(
        self, container: str, prefix: str, env: Mapping[str, str], transfer: TransferSettings = TransferSettings()
    ):
        self.prefix = prefix.strip("/")
        self.uri = f"az://{container}/{self.prefix}".rstrip("/")
        self.transfer = transfer
        container, _, named = container.partition("@")
        conn = env.get(CONNECTION_ENV, "")
        account = named or ("" if conn else env.get(ACCOUNT_ENV, ""))
        sizes = dict(
            max_single_put_size=transfer.part_size,
            max_block_size=transfer.part_size,
            max_single_get_size=transfer.part_size,
            max_chunk_get_size=transfer.part_size,
        )
        if conn and (not account or _conn_account(conn) == account.lower()):
            try:
                service = BlobServiceClient.from_connection_string(conn, **sizes)
            except ValueError as err:
                raise CheckpointError(f"{self.uri}: {CONNECTION_ENV} is not valid: {err}") from err
        elif account:
            service = BlobServiceClient(account_url(account, env), credential=_credential(env), **sizes)
        else:
            raise CheckpointError(
                f"{self.uri}: az:// checkpoints need the storage account: use "
                f"az://container@account/prefix, or set {CONNECTION_ENV} or {ACCOUNT_ENV}"
            )
        self.container = service.get_container_client(container)
        self.service = service

    @contextmanager
    def _errors(self, op: str, key: str) -> Iterator[None]:
        try:
            yield
        except ResourceNotFoundError as err:
            if getattr(err, "error_code", "") == "ContainerNotFound":
                raise CheckpointError(
                    f"{self.uri}: container does not exist; create it (fleet up "
                    "creates the fleet's container) or fix the URI"
                ) from err
            raise
        except ResourceExistsError:
            raise
        except AzureError as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise CheckpointError(f"{self.uri}: cannot {op} {key}: {first}") from err

    def upload(self, key: str, payload: Payload) -> None:
        with self._errors("upload", key):
            self.container.upload_blob(
                join(self.prefix, key),
                payload.reader(),
                length=payload.size,
                overwrite=True,
                max_concurrency=self.transfer.concurrency,
            )

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

    def download(self, key: str, size: int, into: Any = None) -> Any:
        try:
            with self._errors("download", key):
                stream = self.container.download_blob(join(self.prefix, key), max_concurrency=self.transfer.concurrency)
                return download_sized(key, size, stream.size, stream.readinto, into)
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

    def presign(self, key: str, seconds: int) -> str:
        """A read-only SAS URL of the blob: signed with the account key of a connection string,
        else a user-delegation SAS (the signed-in identity needs Storage Blob Delegator, which
        Storage Blob Data Contributor includes)."""
        name = join(self.prefix, key)
        start = datetime.now(timezone.utc) - timedelta(minutes=5)
        expiry = start + timedelta(seconds=seconds + 300)
        blob = self.container.get_blob_client(name)
        with self._errors("sign a URL for", key):
            credential = self.service.credential
            account_key = getattr(credential, "account_key", None)
            if account_key:
                sas = generate_blob_sas(
                    blob.account_name,
                    self.container.container_name,
                    name,
                    account_key=account_key,
                    permission=BlobSasPermissions(read=True),
                    expiry=expiry,
                    start=start,
                )
            else:
                delegation = self.service.get_user_delegation_key(start, expiry)
                sas = generate_blob_sas(
                    blob.account_name,
                    self.container.container_name,
                    name,
                    user_delegation_key=delegation,
                    permission=BlobSasPermissions(read=True),
                    expiry=expiry,
                    start=start,
                )
        return f"{blob.url}?{sas}"

    def delete(self, key: str) -> None:
        try:
            with self._errors("delete", key):
                self.container.delete_blob(join(self.prefix, key))
        except ResourceNotFoundError:
            pass
