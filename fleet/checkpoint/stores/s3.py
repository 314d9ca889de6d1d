"""``s3://bucket/prefix`` checkpoint store (boto3; any S3-compatible endpoint).

Large uploads and downloads use boto3's managed transfers (multipart, parallel parts). The commit
is ``PutObject`` with ``If-None-Match: *``: S3 answers 412 when the key exists, so exactly one of
two racing writers commits. Endpoint and credentials come from the usual AWS variables in ``env``
(``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` for emulators and S3-compatible services).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.payload import BufferWriter, Payload
from fleet.checkpoint.stores.base import TransferSettings, download_sized, join, relative

_MISSING = {"404", "NoSuchKey", "NotFound"}


class S3Store:
    """Checkpoints under ``s3://bucket/prefix``."""

    def __init__(
        self, bucket: str, prefix: str, env: Mapping[str, str], transfer: TransferSettings = TransferSettings()
    ):
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}".rstrip("/")
        session = boto3.session.Session(
            aws_access_key_id=env.get("AWS_ACCESS_KEY_ID"),
            aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY"),
            aws_session_token=env.get("AWS_SESSION_TOKEN"),
            region_name=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
        )
        self._session, self._endpoint = session, env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
        self.client = session.client(
            "s3",
            endpoint_url=self._endpoint,
            config=Config(
                max_pool_connections=transfer.concurrency + 4, retries={"mode": "standard"}, signature_version="s3v4"
            ),
        )
        self.transfer = TransferConfig(
            multipart_threshold=transfer.part_size,
            multipart_chunksize=transfer.part_size,
            max_concurrency=transfer.concurrency,
        )

    @contextmanager
    def _errors(self, op: str, key: str) -> Iterator[None]:
        try:
            yield
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code == "NoSuchBucket":
                raise CheckpointError(
                    f"{self.uri}: bucket {self.bucket!r} does not exist; create it "
                    "(fleet up creates the fleet's bucket) or fix the URI"
                ) from err
            msg = err.response.get("Error", {}).get("Message", "") or str(err)
            raise CheckpointError(f"{self.uri}: cannot {op} {key}: {msg} [{code}]") from err
        except BotoCoreError as err:
            raise CheckpointError(f"{self.uri}: cannot {op} {key}: {err}") from err

    def upload(self, key: str, payload: Payload) -> None:
        with self._errors("upload", key):
            self.client.upload_fileobj(payload.reader(), self.bucket, join(self.prefix, key), Config=self.transfer)

    def create(self, key: str, data: bytes) -> bool:
        for attempt in range(5):
            try:
                with self._errors("commit", key):
                    self.client.put_object(Bucket=self.bucket, Key=join(self.prefix, key), Body=data, IfNoneMatch="*")
                return True
            except CheckpointError as err:
                code = _code(err.__cause__)
                if code == "PreconditionFailed":
                    return False
                if code != "ConditionalRequestConflict" or attempt == 4:
                    raise
                time.sleep(0.05 * 2**attempt)  # a racing conditional write is in flight
        raise AssertionError("unreachable")

    def read(self, key: str) -> bytes | None:
        try:
            with self._errors("read", key):
                body = self.client.get_object(Bucket=self.bucket, Key=join(self.prefix, key))["Body"]
                return body.read()
        except CheckpointError as err:
            if _code(err.__cause__) in _MISSING:
                return None
            raise

    def download(self, key: str, size: int, into: Any = None) -> Any:
        def fetch(out: BufferWriter) -> None:
            self.client.download_fileobj(self.bucket, join(self.prefix, key), out, Config=self.transfer)

        with self._errors("download", key):
            return download_sized(key, size, self.size(key), fetch, into)

    def size(self, key: str) -> int | None:
        try:
            with self._errors("inspect", key):
                return int(self.client.head_object(Bucket=self.bucket, Key=join(self.prefix, key))["ContentLength"])
        except CheckpointError as err:
            if _code(err.__cause__) in _MISSING:
                return None
            raise

    def list(self, prefix: str) -> list[str]:
        keys: list[str] = []
        with self._errors("list", prefix):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=join(self.prefix, prefix)
            )
            for page in pages:
                keys.extend(relative(self.prefix, o["Key"]) for o in page.get("Contents", []))
        return sorted(keys)

    def delete(self, key: str) -> None:
        with self._errors("delete", key):
            self.client.delete_object(Bucket=self.bucket, Key=join(self.prefix, key))

    def presign(self, key: str, seconds: int) -> str:
        """A SigV4 presigned GET URL (valid at most as long as the signing credentials), signed for
        the bucket's own region: a URL signed for another region is refused by S3."""
        with self._errors("sign a URL for", key):
            region = self.client.get_bucket_location(Bucket=self.bucket).get("LocationConstraint") or "us-east-1"
            signer = self.client
            if region != self.client.meta.region_name:
                signer = self._session.client(
                    "s3", region_name=region, endpoint_url=self._endpoint, config=Config(signature_version="s3v4")
                )
            return str(
                signer.generate_presigned_url(
                    "get_object", Params={"Bucket": self.bucket, "Key": join(self.prefix, key)}, ExpiresIn=seconds
                )
            )


def _code(err: Any) -> str:
    if isinstance(err, ClientError):
        return str(err.response.get("Error", {}).get("Code", ""))
    return ""
