"""The fleet's checkpoint bucket on Cloud Storage (``gs://bucket``), created or found; idempotent.

A new bucket gets uniform bucket-level access, public access prevention ``enforced``, the
``spotfleet`` label and, when the spec sets ``expire_days``, one lifecycle rule deleting objects
that old. An existing bucket is brought to the same settings only where they differ (one
patch), so a rerun makes no call that changes anything. ``STORAGE_EMULATOR_HOST`` points the
client at an emulator with anonymous credentials (as ``fleet.checkpoint.stores.gcs`` does).
"""

from __future__ import annotations

import os
import re
from typing import Any

from fleet.errors import AuthError, ProviderError
from providers.base import BucketRef, StorageSpec

#: GCS bucket names: 3-63 lowercase letters, digits, dashes, underscores and dots.
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
LABELS = {"managed-by": "spotfleet"}


def _client(project: str, host: str = "") -> Any:
    from google.cloud import storage

    host = host or os.environ.get("STORAGE_EMULATOR_HOST", "")
    if host:
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(
            project=project, credentials=AnonymousCredentials(), client_options={"api_endpoint": host}
        )
    return storage.Client(project=project)


def _wanted_rules(spec: StorageSpec) -> list[dict[str, Any]]:
    if not spec.expire_days:
        return []
    return [{"action": {"type": "Delete"}, "condition": {"age": int(spec.expire_days)}}]


def _settle(bucket: Any, spec: StorageSpec) -> bool:
    """Set what differs from the wanted settings on ``bucket``; True when something changed."""
    changed = False
    iam = bucket.iam_configuration
    if not iam.uniform_bucket_level_access_enabled:
        iam.uniform_bucket_level_access_enabled = True
        changed = True
    if iam.public_access_prevention != "enforced":
        iam.public_access_prevention = "enforced"
        changed = True
    labels = dict(bucket.labels or {})
    if any(labels.get(k) != v for k, v in LABELS.items()):
        bucket.labels = {**labels, **LABELS}
        changed = True
    rules = _wanted_rules(spec)
    if rules and [dict(r) for r in bucket.lifecycle_rules] != rules:
        bucket.lifecycle_rules = rules
        changed = True
    return changed


def ensure_bucket(project: str, spec: StorageSpec, *, host: str = "") -> BucketRef:
    """Create (or find) ``spec.bucket`` with the settings above and return its ``gs://`` URI.

    Raises ProviderError (code ``InvalidBucketName``) for a name GCS refuses, AuthError when
    the bucket belongs to someone else or credentials are refused. ``host``: an emulator's URL
    (default ``$STORAGE_EMULATOR_HOST``).
    """
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    if not BUCKET_RE.match(spec.bucket) or ".." in spec.bucket or spec.bucket.startswith("goog"):
        raise ProviderError(
            "gcp",
            f"invalid bucket name {spec.bucket!r}: use 3-63 lowercase letters, digits, "
            "dashes, underscores and dots, starting and ending with a letter or digit",
            region=spec.region,
            code="InvalidBucketName",
        )
    try:
        client = _client(project, host)
        bucket = client.lookup_bucket(spec.bucket)
        if bucket is None:
            bucket = client.bucket(spec.bucket)
            _settle(bucket, spec)
            bucket = client.create_bucket(bucket, location=spec.region or "US")
        elif _settle(bucket, spec):
            bucket.patch()
    except gexc.Conflict as err:
        raise ProviderError(
            "gcp",
            f"bucket {spec.bucket!r} is taken by another project (GCS names are global): "
            "set checkpoint.bucket to another name",
            region=spec.region,
            code="BucketNameTaken",
        ) from err
    except gexc.Forbidden as err:
        raise AuthError(
            "gcp", f"no access to bucket {spec.bucket!r}: {err.message}", region=spec.region, code="forbidden"
        ) from err
    except auth_exc.GoogleAuthError as err:
        raise AuthError("gcp", f"no Google credentials for Cloud Storage: {err}", code="NoCredentials") from err
    except gexc.GoogleAPICallError as err:
        from providers.gcp.errors import from_api_error

        raise from_api_error(err, region=spec.region) from err
    return BucketRef(provider="gcp", bucket=spec.bucket, uri=f"gs://{spec.bucket}", region=spec.region)
