"""What a node without a cloud identity needs besides its scoped credentials to reach the fleet's store.

A node of a provider with no identity for the checkpoint store (``providers.base.NodesWithoutIdentity``:
Vast, OCI) receives the scoped credentials ``fleet up`` grants, plus the store's non-secret
settings (region, endpoint), taken from the operator's environment by the URI's scheme.
Credentials are never taken from that environment.
"""

from __future__ import annotations

from typing import Mapping

#: Checkpoint URI scheme -> the non-secret variables its store reads (``fleet.checkpoint.stores``).
STORE_SETTINGS: dict[str, tuple[str, ...]] = {
    "s3": ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "gs": ("GOOGLE_CLOUD_PROJECT", "STORAGE_EMULATOR_HOST"),
    "az": (),
}


def store_scheme(checkpoint_uri: str) -> str:
    """``s3``/``gs``/``az`` for a remote store, ``""`` for none (the node keeps checkpoints itself)."""
    scheme = checkpoint_uri.split("://", 1)[0] if "://" in checkpoint_uri else ""
    return scheme if scheme in STORE_SETTINGS else ""


def store_settings(checkpoint_uri: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The non-secret variables a node needs to reach ``checkpoint_uri``'s store, from ``environ``."""
    return {name: environ[name] for name in STORE_SETTINGS.get(store_scheme(checkpoint_uri), ()) if environ.get(name)}


def require_node_credentials(provider: str, checkpoint_uri: str, granted: Mapping[str, str]) -> None:
    """Refuse a launch whose nodes write to a remote store but were given no scoped credentials for it."""
    from fleet.errors import ProviderError

    if store_scheme(checkpoint_uri) and not granted:
        raise ProviderError(provider, f"nodes checkpoint to {checkpoint_uri} but were given no scoped credentials for "
                            f"it (a {provider} node has no identity for that store, and the operator's own keys are "
                            "never sent); `fleet up` grants them", code="no-node-credentials")
