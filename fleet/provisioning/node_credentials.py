"""Scoped checkpoint-store credentials for nodes without a cloud identity: when, from whom, until when.

A node on AWS, GCP or Azure reaches the fleet's bucket with its own identity (an instance profile,
a service account, a managed identity). A node of a provider that has none (``NodesWithoutIdentity``:
Vast, RunPod) runs on a third party's machine, so it gets credentials that
reach the fleet's prefix only and that ``fleet down`` revokes, never the operator's own keys:

* :func:`grant` (``fleet up`` and the rebalancer, before launching; idempotent) asks the store's
  owner (``GrantsNodeCredentials``: aws for ``s3``, azure for ``azure``) for them and hands them to
  each such provider. A store whose owner cannot scope credentials (``gcs`` for now) is refused
  with the fix, before anything is launched.
* :func:`revoke` (``fleet down``, once nothing of the fleet is left) deletes them.
"""

from __future__ import annotations

from collections.abc import Mapping

from fleet.errors import FleetError
from fleet.provisioning.storage import STORE_PROVIDER, storage_spec
from fleet.spec import Backend, FleetSpec
from providers.base import GrantsNodeCredentials, NodesWithoutIdentity, Provider


def _without_identity(providers: Mapping[str, Provider]) -> list[str]:
    return sorted(name for name, p in providers.items() if isinstance(p, NodesWithoutIdentity))


def grant(spec: FleetSpec, providers: Mapping[str, Provider]) -> None:
    """Give every provider without a node identity the fleet's scoped store credentials."""
    needy = _without_identity(providers)
    store = spec.checkpoint.provider
    if not needy or spec.backend is Backend.LOCAL or store == "local":
        return
    owner = providers.get(STORE_PROVIDER[store])
    if not isinstance(owner, GrantsNodeCredentials):
        raise FleetError(
            f"checkpoint.provider {store!r} cannot give {', '.join(needy)} nodes (which have no cloud "
            f"identity) credentials limited to the fleet's prefix, and the operator's own keys are never "
            f"sent; use checkpoint.provider: s3 or azure, or checkpoint.provider: local (the node keeps "
            f"its checkpoints), or disable {', '.join(needy)}"
        )
    env = owner.grant_node_credentials(storage_spec(spec))
    for name in needy:
        provider = providers[name]
        assert isinstance(provider, NodesWithoutIdentity)
        provider.use_node_credentials(env)


def revoke(spec: FleetSpec, providers: Mapping[str, Provider]) -> list[str]:
    """Delete the scoped credentials :func:`grant` made for ``spec``'s fleet (only where a provider
    without a node identity is enabled, so a cloud-only fleet makes no extra call); the names
    deleted. Raises ProviderError."""
    store = spec.checkpoint.provider
    if not _without_identity(providers) or spec.backend is Backend.LOCAL or store == "local":
        return []
    owner = providers.get(STORE_PROVIDER[store])
    if not isinstance(owner, GrantsNodeCredentials):
        return []
    return owner.revoke_node_credentials(storage_spec(spec))
