"""Scoped, revocable Blob credentials for nodes without a cloud identity (Vast hosts).

A service SAS on the fleet's checkpoint container, bound to the container's stored access policy
:data:`POLICY_ID` (read, add, create, write, delete, list; nothing on any other container or on
the account). The policy holds the expiry, :data:`VALID_DAYS` from the last grant: every
``fleet up`` and every rebalancer pass that launches renews it, so running nodes keep access
while the fleet is looked after and lose it within days once it is not; ``fleet down`` deletes
the policy, which revokes every SAS made under it at once (Azure checks the policy on each
request). Blob SAS cannot be narrowed to a prefix of a flat-namespace container, so the scope is
the fleet's container (``<fleet>-checkpoints`` unless ``checkpoint.bucket`` says otherwise).

The node receives ``AZURE_STORAGE_CONNECTION_STRING=BlobEndpoint=...;SharedAccessSignature=...``,
which ``fleet.checkpoint.stores.azure`` reads as any connection string; never the account key.
Made through ``$AZURE_STORAGE_CONNECTION_STRING`` (an account key signs the SAS); the ARM path
(a managed identity, no key here) is refused with the fix.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from fleet.errors import AuthError
from fleet.safetext import register_secret
from providers.base import StorageSpec

CONNECTION_ENV = "AZURE_STORAGE_CONNECTION_STRING"
POLICY_ID = "spotfleet-nodes"
VALID_DAYS = 7


def _container(environ: Mapping[str, str], spec: StorageSpec) -> tuple[Any, Any]:
    from azure.storage.blob import BlobServiceClient

    conn = environ.get(CONNECTION_ENV, "")
    if not conn:
        raise AuthError(
            "azure",
            f"nodes without a cloud identity (Vast) need a SAS for container {spec.bucket!r}, "
            f"signed with the storage account key: set {CONNECTION_ENV} (with AccountKey=) where `fleet up` "
            "runs",
            code="no-account-key",
        )
    try:
        service = BlobServiceClient.from_connection_string(conn)
    except ValueError as err:
        raise AuthError("azure", f"{CONNECTION_ENV} is not valid: {err}", code="bad-connection-string") from None
    if not getattr(service.credential, "account_key", None):
        raise AuthError(
            "azure",
            f"{CONNECTION_ENV} holds no AccountKey, so no SAS can be signed for nodes without a "
            "cloud identity; use the account's key connection string",
            code="no-account-key",
        )
    return service, service.get_container_client(spec.bucket)


def _others(container: Any) -> tuple[dict[str, Any], Any, bool]:
    """The container's stored access policies other than ours, its public access setting, and
    whether ours is there (what is not ours is written back as it was)."""
    got = container.get_container_access_policy()
    identifiers = got.get("signed_identifiers") or []
    return (
        {s.id: s.access_policy for s in identifiers if s.id != POLICY_ID},
        got.get("public_access"),
        any(s.id == POLICY_ID for s in identifiers),
    )


def ensure(environ: Mapping[str, str], spec: StorageSpec, *, now: dt.datetime | None = None) -> dict[str, str]:
    """The node environment reaching ``spec.bucket`` through a SAS under the renewed policy."""
    from azure.core.exceptions import AzureError
    from azure.storage.blob import AccessPolicy, ContainerSasPermissions, generate_container_sas

    service, container = _container(environ, spec)
    start = (now or dt.datetime.now(dt.timezone.utc)) - dt.timedelta(minutes=15)  # clock skew
    try:
        others, public, _ours = _others(container)
        policy = AccessPolicy(
            permission=ContainerSasPermissions(read=True, add=True, create=True, write=True, delete=True, list=True),
            start=start,
            expiry=start + dt.timedelta(days=VALID_DAYS),
        )
        container.set_container_access_policy(signed_identifiers={**others, POLICY_ID: policy}, public_access=public)
    except AzureError as err:
        from providers.azure.errors import to_error

        raise to_error(err, f"set the nodes' access policy on container {spec.bucket}") from err
    sas = generate_container_sas(
        service.account_name, spec.bucket, account_key=service.credential.account_key, policy_id=POLICY_ID
    )
    register_secret(sas)
    return {CONNECTION_ENV: f"BlobEndpoint={service.url.rstrip('/')};SharedAccessSignature={sas}"}


def revoke(environ: Mapping[str, str], spec: StorageSpec) -> list[str]:
    """Delete the container's :data:`POLICY_ID` policy (every node SAS stops working); idempotent."""
    from azure.core.exceptions import AzureError, ResourceNotFoundError

    _service, container = _container(environ, spec)
    try:
        others, public, ours = _others(container)
        if not ours:
            return []
        container.set_container_access_policy(signed_identifiers=others, public_access=public)
    except ResourceNotFoundError:
        return []
    except AzureError as err:
        from providers.azure.errors import to_error

        raise to_error(err, f"remove the nodes' access policy from container {spec.bucket}") from err
    return [f"access policy {POLICY_ID} of container {spec.bucket}"]
