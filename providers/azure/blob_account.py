"""What checkpoint storage through ARM looks like: names, bodies and the node's URI. Pure: no I/O.

* The storage account is ``providers.azure.storage_account`` or, by default, a name derived from the
  subscription, resource group and container (:func:`account_name`: 3-24 lowercase letters and
  digits, as Azure requires; account names are global, so the hash keeps two users apart).
* The node URI names the account: ``az://<container>@<account>/<prefix>`` (the ``container@account``
  form of Azure's ``abfs://`` URLs; a container name cannot hold ``@``, so ``az://container/prefix``
  still means "the account of the connection string").
* One lifecycle rule per container and prefix (:func:`lifecycle_rule`) in the account's
  ``managementPolicies/default``, merged with the rules others put there (:func:`merged_rules`).
* The node identity is a user-assigned managed identity per container (:func:`identity_name`),
  allowed Storage Blob Data Contributor on that container only (:func:`role_assignment_name`).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Any

ACCOUNT = re.compile(r"^[a-z0-9]{3,24}$")
TAG_MANAGED = "spotfleet:managed"
TAG_BUCKET = "spotfleet:bucket"
#: Storage Blob Data Contributor (built-in role definition id).
BLOB_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
IDENTITY_API = "2023-01-31"
ROLE_API = "2022-04-01"


def account_name(subscription: str, resource_group: str, container: str) -> str:
    """The default account: up to 14 letters/digits of the container, then 10 hex of a hash."""
    digest = hashlib.sha256(f"{subscription}/{resource_group}/{container}".lower().encode()).hexdigest()
    return re.sub(r"[^a-z0-9]", "", container.lower())[:14] + digest[:10]


def bucket_uri(container: str, account: str) -> str:
    """The URI nodes get (before the prefix): ``az://container@account``."""
    return f"az://{container}@{account}"


def account_from_uri(uri: str) -> tuple[str, str]:
    """(container, account) of ``az://container@account/...``; account "" for ``az://container/...``."""
    if not uri.startswith("az://"):
        return "", ""
    container, _, account = uri[5:].split("/", 1)[0].partition("@")
    return container, account


def account_body(location: str, tags: dict[str, str]) -> dict[str, Any]:
    """A StorageV2 account: HTTPS only, no public blob access, TLS 1.2 at least, locally redundant."""
    return {
        "location": location,
        "tags": tags,
        "kind": "StorageV2",
        "sku": {"name": "Standard_LRS"},
        "properties": {
            "supportsHttpsTrafficOnly": True,
            "allowBlobPublicAccess": False,
            "minimumTlsVersion": "TLS1_2",
            "accessTier": "Hot",
        },
    }


def insecure_settings(account: dict[str, Any]) -> list[str]:
    """What an existing account (ARM wire format) allows that checkpoints should not."""
    props = account.get("properties") or {}
    out = []
    if props.get("supportsHttpsTrafficOnly") is False:
        out.append("plain HTTP (supportsHttpsTrafficOnly: false)")
    if props.get("allowBlobPublicAccess") is True:
        out.append("public blob access (allowBlobPublicAccess: true)")
    if props.get("minimumTlsVersion") in ("TLS1_0", "TLS1_1"):
        out.append(f"TLS below 1.2 (minimumTlsVersion: {props['minimumTlsVersion']})")
    return out


def rule_name(container: str, prefix: str) -> str:
    """The lifecycle rule of one container/prefix (rule names are alphanumeric only)."""
    digest = hashlib.sha256(f"{container}/{prefix}".encode()).hexdigest()[:8]
    return f"spotfleet{re.sub(r'[^A-Za-z0-9]', '', container)[:40]}{digest}"


def lifecycle_rule(container: str, prefix: str, days: int) -> dict[str, Any]:
    """Delete block blobs under ``container/prefix/`` ``days`` days after their last change."""
    match = f"{container}/{prefix.strip('/')}/" if prefix.strip("/") else f"{container}/"
    return {
        "name": rule_name(container, prefix),
        "enabled": True,
        "type": "Lifecycle",
        "definition": {
            "filters": {"blobTypes": ["blockBlob"], "prefixMatch": [match]},
            "actions": {"baseBlob": {"delete": {"daysAfterModificationGreaterThan": days}}},
        },
    }


def merged_rules(existing: list[dict[str, Any]], name: str, rule: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``existing`` with the rule called ``name`` replaced by ``rule`` (removed when None)."""
    out = [r for r in existing if r.get("name") != name]
    return out + [rule] if rule is not None else out


def identity_name(account: str, container: str) -> str:
    """The node identity of one container (3-128 letters, digits, dashes)."""
    return f"spotfleet-{account}-{container}"


def identity_id(subscription: str, resource_group: str, name: str) -> str:
    return (
        f"/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/"
        f"Microsoft.ManagedIdentity/userAssignedIdentities/{name}"
    )


def role_assignment_name(scope: str, principal: str) -> str:
    """A GUID fixed by scope, principal and role, so a rerun names the same assignment."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{scope.lower()}|{principal}|{BLOB_CONTRIBUTOR}"))


def role_assignment_body(subscription: str, principal: str) -> dict[str, Any]:
    """Storage Blob Data Contributor for ``principal``; ``principalType`` lets ARM accept a principal
    Entra ID has not replicated yet (a just-created identity)."""
    return {
        "properties": {
            "roleDefinitionId": f"/subscriptions/{subscription}/providers/Microsoft.Authorization/"
            f"roleDefinitions/{BLOB_CONTRIBUTOR}",
            "principalId": principal,
            "principalType": "ServicePrincipal",
        }
    }
