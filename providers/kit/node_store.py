"""How a node without a cloud identity reaches its checkpoint store (Vast, Lambda, ...).

Such a node runs on a machine that no cloud account vouches for, so it reaches the spec's
checkpoint store (S3, GCS, Azure) with the scoped, revocable credentials ``fleet up`` grants the
fleet (``fleet.provisioning.node_credentials``; an adapter receives them through
``NodesWithoutIdentity.use_node_credentials``) and with the store's non-secret settings
(region, endpoint), which :func:`store_settings` takes from the operator's environment by the
URI's scheme. Credentials are never taken from that environment.

:func:`node_disk_bucket` is the ``ensure_bucket`` of a provider without object storage: a
folder on each node's own disk, which lives only as long as the instance.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from fleet.errors import ProviderError
from providers.base import BucketRef, StorageSpec

#: Checkpoint URI scheme -> the non-secret variables its store reads (``fleet.checkpoint.stores``).
STORE_SETTINGS: dict[str, tuple[str, ...]] = {
    "s3": ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "gs": ("GOOGLE_CLOUD_PROJECT", "STORAGE_EMULATOR_HOST"),
    "az": (),
}
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def store_scheme(checkpoint_uri: str) -> str:
    """``s3``/``gs``/``az`` for a remote store, ``""`` for none (the node keeps checkpoints itself)."""
    scheme = checkpoint_uri.split("://", 1)[0] if "://" in checkpoint_uri else ""
    return scheme if scheme in STORE_SETTINGS else ""


def store_settings(checkpoint_uri: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The non-secret variables a node needs to reach ``checkpoint_uri``'s store, from ``environ``."""
    return {name: environ[name] for name in STORE_SETTINGS.get(store_scheme(checkpoint_uri), ()) if environ.get(name)}


def missing_credentials(provider: str, checkpoint_uri: str, granted: Mapping[str, str]) -> ProviderError | None:
    """The refusal for a launch whose nodes checkpoint to a remote store without scoped credentials."""
    if not store_scheme(checkpoint_uri) or granted:
        return None
    return ProviderError(
        provider,
        f"nodes checkpoint to {checkpoint_uri} but were given no scoped credentials for it "
        f"(a {provider} node has no cloud identity, and the operator's own keys are never sent); "
        "`fleet up` grants them",
        code="no-node-credentials",
    )


def node_disk_bucket(provider: str, spec: StorageSpec, root: str) -> BucketRef:
    """A checkpoint "bucket" that is the folder ``<root>/<bucket>`` on each node's disk."""
    if not _BUCKET.match(spec.bucket):
        raise ProviderError(
            provider,
            f"bucket name {spec.bucket!r} is not valid: use 3-63 lowercase letters, digits, dots and dashes",
            code="invalid-bucket-name",
        )
    return BucketRef(provider=provider, bucket=spec.bucket, uri=f"file://{root}/{spec.bucket}")
