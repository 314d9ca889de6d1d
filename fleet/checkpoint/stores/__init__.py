"""Checkpoint storage backends, chosen by URI scheme.

``open_store(uri)`` accepts ``file:///dir``, ``s3://bucket/prefix``, ``gs://bucket/prefix`` and
``az://container/prefix`` (``az://container@account/prefix`` names the storage account). A plain path (``/data/ckpt``, ``runs/one``) is accepted on purpose as a
local directory; a relative one is resolved against the current directory when opened. The cloud
SDK of a scheme is imported only when that scheme is used, so a node needs just the extra it writes
to (``pip install 'spotfleet[s3]'``, ``[gcs]``, ``[azure]``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from urllib.parse import unquote, urlparse

from fleet.checkpoint.errors import CheckpointError
from fleet.checkpoint.stores.base import ObjectStore, TransferSettings

__all__ = ["ObjectStore", "TransferSettings", "open_store", "SCHEMES"]

# scheme -> (module, class, pip extra, SDK distribution)
_BACKENDS = {
    "s3": ("fleet.checkpoint.stores.s3", "S3Store", "s3", "boto3"),
    "gs": ("fleet.checkpoint.stores.gcs", "GCSStore", "gcs", "google-cloud-storage"),
    "az": ("fleet.checkpoint.stores.azure", "AzureStore", "azure", "azure-storage-blob"),
}
SCHEMES = "file:///dir, s3://bucket/prefix, gs://bucket/prefix or az://container/prefix"


def open_store(
    uri: str, *, env: Mapping[str, str] | None = None, transfer: TransferSettings | None = None
) -> ObjectStore:
    """The store for ``uri``; endpoints and credentials are read from ``env`` (default ``os.environ``).

    Raises :class:`CheckpointError` for an unknown scheme, a URI without a bucket, or a missing SDK
    (naming the pip extra that provides it).
    """
    env = os.environ if env is None else env
    transfer = transfer or TransferSettings()
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    if scheme in ("", "file"):
        from fleet.checkpoint.stores.local import LocalStore

        if scheme == "file" and parsed.netloc not in ("", "localhost"):
            raise CheckpointError(f"{uri}: a file URI needs an absolute path: file:///dir (three slashes)")
        path = unquote(parsed.path) if scheme else uri
        if not path:
            raise CheckpointError(f"{uri!r}: empty checkpoint location; use {SCHEMES}")
        return LocalStore(os.path.abspath(path))
    if scheme == "gcs":
        scheme = "gs"
    if scheme not in _BACKENDS:
        raise CheckpointError(f"{uri}: unknown checkpoint storage scheme {parsed.scheme!r}; use {SCHEMES}")
    if not parsed.netloc:
        raise CheckpointError(f"{uri}: no bucket in the checkpoint URI; use {SCHEMES}")
    module_name, class_name, extra, dist = _BACKENDS[scheme]
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        if (err.name or "").startswith("fleet"):
            raise  # our own bug, not a missing SDK
        raise CheckpointError(
            f"{uri}: {scheme}:// checkpoints need {dist} ({err.name} is missing): pip install 'spotfleet[{extra}]'"
        ) from err
    return getattr(module, class_name)(parsed.netloc, parsed.path, env, transfer)
