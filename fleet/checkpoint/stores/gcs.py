"""``gs://bucket/prefix`` checkpoint store (google-cloud-storage).

Large uploads are parallel composite uploads: the payload is cut into up to 32 parts uploaded
concurrently as temporary objects, composed into the final object, and the parts deleted. Small
ones are a single chunked (resumable) upload. The commit is an upload with
``if_generation_match=0``: GCS answers 412 when the object exists, so exactly one racing writer
commits. ``STORAGE_EMULATOR_HOST`` in ``env`` points the client at an emulator (anonymous
credentials); otherwise Application Default Credentials are used.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import requests
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
from google.resumable_media import common as media

from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.payload import Payload
from fleet.checkpoint.stores.base import TransferSettings, download_sized, join, relative

_MAX_COMPONENTS = 32  # GCS compose limit per request
_CHUNK_GRANULE = 256 * 1024  # resumable chunk sizes must be multiples of 256 KiB


class GCSStore:
    """Checkpoints under ``gs://bucket/prefix``."""

    def __init__(
        self, bucket: str, prefix: str, env: Mapping[str, str], transfer: TransferSettings = TransferSettings()
    ):
        self.prefix = prefix.strip("/")
        self.uri = f"gs://{bucket}/{self.prefix}".rstrip("/")
        self.transfer = transfer
        host = env.get("STORAGE_EMULATOR_HOST")
        project = env.get("GOOGLE_CLOUD_PROJECT") or env.get("GCLOUD_PROJECT")
        with self._errors("connect to", bucket):
            if host:
                client = storage.Client(
                    project=project or "emulator",
                    credentials=AnonymousCredentials(),
                    client_options={"api_endpoint": host},
                )
            else:
                client = storage.Client(project=project)
        self.bucket = client.bucket(bucket)
        self.emulator = host or ""

    @contextmanager
    def _errors(self, op: str, key: str) -> Iterator[None]:
        try:
            yield
        except auth_exc.DefaultCredentialsError as err:
            raise CheckpointError(
                f"{self.uri}: no Google credentials; run with a service account or set GOOGLE_APPLICATION_CREDENTIALS"
            ) from err
        except gexc.NotFound as err:
            raise CheckpointError(
                f"{self.uri}: cannot {op} {key}: not found (does the bucket exist? fleet up creates the fleet's bucket)"
            ) from err
        except (gexc.GoogleAPIError, auth_exc.GoogleAuthError, media.InvalidResponse, requests.RequestException) as err:
            raise CheckpointError(f"{self.uri}: cannot {op} {key}: {err}") from err

    def _blob(self, key: str, chunk_size: int | None = None) -> storage.Blob:
        return self.bucket.blob(join(self.prefix, key), chunk_size=chunk_size)

    def upload(self, key: str, payload: Payload) -> None:
        size, part = payload.size, self.transfer.part_size
        with self._errors("upload", key):
            if size <= part:
                self._put_stream(key, payload.reader(), size)
                return
            part = max(part, -(-size // _MAX_COMPONENTS))
            part += -part % _CHUNK_GRANULE
            spans = [(i, off, min(part, size - off)) for i, off in enumerate(range(0, size, part))]
            names = [f"{key}.part-{i:02d}" for i, _, _ in spans]

            def put(span: tuple[int, int, int]) -> None:
                i, off, n = span
                self._put_stream(names[i], payload.slice(off, n).reader(), n)

            try:
                with ThreadPoolExecutor(self.transfer.concurrency) as pool:
                    list(pool.map(put, spans))
                self._blob(key).compose([self._blob(n) for n in names])
            finally:
                for name in names:
                    self.delete(name)

    def _put_stream(self, key: str, stream: io.RawIOBase, size: int) -> None:
        blob = self._blob(key, chunk_size=self.transfer.part_size - self.transfer.part_size % _CHUNK_GRANULE)
        blob.upload_from_file(stream, size=size, rewind=False, checksum=None)

    def create(self, key: str, data: bytes) -> bool:
        try:
            with self._errors("commit", key):
                self._blob(key).upload_from_string(data, if_generation_match=0)
            return True
        except CheckpointError as err:
            if isinstance(err.__cause__, gexc.PreconditionFailed):
                return False
            raise

    def read(self, key: str) -> bytes | None:
        try:
            with self._errors("read", key):
                return self._blob(key).download_as_bytes()
        except CheckpointError as err:
            if isinstance(err.__cause__, gexc.NotFound):
                return None
            raise

    def download(self, key: str, size: int, into: Any = None) -> Any:
        with self._errors("download", key):
            return download_sized(key, size, self.size(key), self._blob(key).download_to_file, into)

    def size(self, key: str) -> int | None:
        with self._errors("inspect", key):
            blob = self.bucket.get_blob(join(self.prefix, key))
        return None if blob is None else int(blob.size)

    def list(self, prefix: str) -> list[str]:
        with self._errors("list", prefix):
            blobs = self.bucket.client.list_blobs(self.bucket, prefix=join(self.prefix, prefix))
            return sorted(relative(self.prefix, b.name) for b in blobs)

    def presign(self, key: str, seconds: int) -> str:
        """A V4 signed GET URL; against an emulator (anonymous) its plain media URL.

        Signing needs credentials that can sign: a service-account key, or a service account's
        token with ``iam.serviceAccounts.signBlob`` (what a GCE VM's default credentials use)."""
        name = join(self.prefix, key)
        if self.emulator:
            return (
                f"{self.emulator.rstrip('/')}/download/storage/v1/b/{self.bucket.name}/o/"
                f"{quote(name, safe='')}?alt=media"
            )
        with self._errors("sign a URL for", key):
            try:
                return str(
                    self._blob(key).generate_signed_url(
                        version="v4", expiration=timedelta(seconds=seconds), method="GET"
                    )
                )
            except AttributeError as err:  # user credentials (gcloud auth login) cannot sign
                raise CheckpointError(
                    f"{self.uri}: cannot sign a URL for {key}: these Google credentials "
                    "cannot sign; use a service account (GOOGLE_APPLICATION_CREDENTIALS="
                    "key.json)"
                ) from err

    def delete(self, key: str) -> None:
        try:
            with self._errors("delete", key):
                self._blob(key).delete()
        except CheckpointError as err:
            if not isinstance(err.__cause__, gexc.NotFound):
                raise
