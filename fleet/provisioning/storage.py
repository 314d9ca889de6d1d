"""Checkpoint storage for a fleet on real clouds: ensure the bucket, hand its URI to every node.

``checkpoint_uri(spec, providers)`` is called by ``fleet up`` before anything launches. The
spec's ``checkpoint.provider`` names the store (``s3`` -> the aws adapter, ``gcs`` -> gcp,
``azure`` -> azure); that adapter's ``ensure_bucket`` creates or finds the bucket (idempotent),
and the URI it returns reaches nodes as ``$SPOTFLEET_CHECKPOINT_URI`` through the node
bootstrap. ``local`` (the default) means the node keeps checkpoints itself, and the embedded
local cloud gives each fleet a bucket directory on its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from fleet.errors import FleetError
from fleet.spec import Backend, FleetSpec
from providers.base import Provider, StorageSpec

#: Which adapter owns each checkpoint store.
STORE_PROVIDER = {"s3": "aws", "gcs": "gcp", "azure": "azure"}


def checkpoint_uri(spec: FleetSpec, providers: Mapping[str, Provider]) -> str:
    """The URI nodes write checkpoints to ("" when the provider or the node decides).

    Raises FleetError when the spec's store belongs to a provider the spec does not enable.
    """
    store = spec.checkpoint.provider
    if spec.backend is Backend.LOCAL or store == "local":
        return ""
    owner = STORE_PROVIDER[store]
    provider = providers.get(owner)
    if provider is None:
        raise FleetError(
            f"checkpoint.provider is {store!r}, which needs the {owner} provider: enable "
            f"{owner} under `providers:` or choose another checkpoint.provider"
        )
    wanted = storage_spec(spec)
    ref = provider.ensure_bucket(wanted)
    return f"{ref.uri.rstrip('/')}/{wanted.prefix}"


def storage_spec(spec: FleetSpec) -> StorageSpec:
    """The checkpoint storage ``spec`` asks its store's owner (``STORE_PROVIDER``) for."""
    return StorageSpec(
        provider=STORE_PROVIDER.get(spec.checkpoint.provider, spec.checkpoint.provider),
        bucket=spec.checkpoint.bucket or f"{spec.name}-checkpoints",
        region=spec.checkpoint.region,
        keep_last=spec.checkpoint.keep_last,
        expire_days=spec.checkpoint.expire_days,
        prefix=(spec.checkpoint.prefix or spec.name).strip("/"),
        fleet=spec.name,
    )
