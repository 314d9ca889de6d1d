"""Directory-backed checkpoint buckets of the local cloud (``file://`` URIs)."""

from __future__ import annotations

import re
from pathlib import Path

from fleet.errors import ProviderError
from providers.base import BucketRef, StorageSpec

#: The S3/GCS naming rule, the strictest common subset: 3-63 lowercase letters, digits,
#: dots and dashes, starting and ending with a letter or digit.
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def ensure(root: Path, provider: str, spec: StorageSpec) -> BucketRef:
    """Create ``<root>/<bucket>`` if missing and return its ``file://`` URI; idempotent.

    Raises ProviderError (code ``InvalidBucketName``) for a name real object stores refuse.
    """
    if not BUCKET_RE.match(spec.bucket) or ".." in spec.bucket:
        raise ProviderError(
            provider,
            f"invalid bucket name {spec.bucket!r}: use 3-63 lowercase letters, "
            "digits, dots and dashes, starting and ending with a letter or digit",
            region=spec.region,
            code="InvalidBucketName",
        )
    path = root / spec.bucket
    path.mkdir(parents=True, exist_ok=True)
    return BucketRef(provider=provider, bucket=spec.bucket, uri=path.resolve().as_uri(), region=spec.region)
