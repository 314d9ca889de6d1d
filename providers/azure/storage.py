"""``ensure_bucket`` on Azure: a private Blob container for checkpoints, and the node identity.

Two ways, chosen by the environment:

* ``$AZURE_STORAGE_CONNECTION_STRING`` set and no ``providers.azure.storage_account`` in the spec:
  the container is created in that account through the Blob API (:func:`ensure_container`,
  Azurite in tests); the URI is ``az://container`` and nodes need the same variable.
* otherwise, through Azure Resource Manager (:func:`ensure_account_storage`): the storage account
  (``providers.azure.storage_account``, or a name derived from subscription, resource group and
  container; created if missing, tagged; StorageV2, HTTPS only, no public blob access, TLS 1.2),
  the private container, a lifecycle rule deleting blobs under the fleet's prefix after
  ``expire_days``, a user-assigned managed identity and its Storage Blob Data Contributor role on
  that container only. The URI is ``az://container@account``; VMs launched with it carry the
  identity (:func:`node_identity`), so nodes need no key. Every step reads first and writes only
  what is missing or different: a rerun changes nothing. An account name held elsewhere (another
  subscription or resource group), or an unmarked account under our default name, is refused with
  the fix.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from fleet.errors import AuthError, InstanceNotFoundError, ProviderError
from fleet.model import TAG_FLEET
from providers.azure import blob_account as ba
from providers.azure.arm import Arm, wire
from providers.azure.group import ensure_group
from providers.azure.settings import AzureSettings
from providers.base import BucketRef, StorageSpec

log = logging.getLogger(__name__)

CONNECTION_ENV = "AZURE_STORAGE_CONNECTION_STRING"
#: Azure container names: 3-63 lowercase letters, digits and single dashes, starting alphanumeric.
CONTAINER = re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


def check_container_name(bucket: str) -> None:
    if not CONTAINER.match(bucket):
        raise ProviderError(
            "azure",
            f"container name {bucket!r} is not valid: use 3-63 lowercase letters, digits and single dashes",
            code="invalid-bucket-name",
        )


def uses_connection_string(settings: AzureSettings, environ: Mapping[str, str]) -> bool:
    """True when checkpoints go through ``$AZURE_STORAGE_CONNECTION_STRING`` rather than ARM."""
    return bool(environ.get(CONNECTION_ENV)) and not settings.storage_account


def ensure_container(spec: StorageSpec, environ: Mapping[str, str]) -> BucketRef:
    """The container ``spec.bucket`` in the connection string's account, created if missing."""
    check_container_name(spec.bucket)
    conn = environ.get(CONNECTION_ENV, "")
    if not conn:
        raise AuthError(
            "azure",
            f"checkpoint container {spec.bucket!r}: set {CONNECTION_ENV} to the storage "
            "account nodes write checkpoints to",
            code="no-storage-account",
        )
    from azure.core.exceptions import AzureError, ResourceExistsError
    from azure.storage.blob import BlobServiceClient

    try:
        service = BlobServiceClient.from_connection_string(conn)
        try:
            service.create_container(spec.bucket)
        except ResourceExistsError:
            pass
    except ValueError as err:
        raise AuthError("azure", f"{CONNECTION_ENV} is not valid: {err}", code="bad-connection-string") from err
    except AzureError as err:
        from providers.azure.errors import to_error

        raise to_error(err, f"create container {spec.bucket}") from err
    return BucketRef(provider="azure", bucket=spec.bucket, uri=f"az://{spec.bucket}", region=spec.region)


class AccountStorage:
    """Checkpoint storage through ARM for one subscription and resource group."""

    def __init__(self, arm: Arm, resource_group: str, settings: AzureSettings):
        self.arm, self.rg, self.settings = arm, resource_group, settings

    # ---- ensure_bucket ------------------------------------------------------------------------
    def ensure(self, spec: StorageSpec) -> BucketRef:
        check_container_name(spec.bucket)
        named = self.settings.storage_account
        account = named or ba.account_name(self.arm.subscription, self.rg, spec.bucket)
        if not ba.ACCOUNT.match(account):
            raise ProviderError(
                "azure",
                f"providers.azure.storage_account {account!r} is not valid: use 3-24 lowercase letters and digits",
                code="invalid-storage-account",
            )
        location = self._group(spec.region or (self.settings.regions or [""])[0])
        tags = {ba.TAG_MANAGED: "true", ba.TAG_BUCKET: spec.bucket, **({TAG_FLEET: spec.fleet} if spec.fleet else {})}
        self._account(account, location, tags, user_named=bool(named))
        container_id = self._container(account, spec.bucket)
        self._lifecycle(account, spec)
        principal = self._identity(ba.identity_name(account, spec.bucket), location, tags)["principalId"]
        self._role(container_id, principal)
        return BucketRef(provider="azure", bucket=spec.bucket, uri=ba.bucket_uri(spec.bucket, account), region=location)

    def _get(self, fn: Any, what: str) -> dict[str, Any] | None:
        """The resource ``fn()`` reads, or None when ARM answers 404."""
        try:
            return wire(self.arm.call(fn, what))
        except InstanceNotFoundError:
            return None

    def _group(self, location: str) -> str:
        """The location for the storage: ``location``, else the resource group's (created in
        ``location`` when missing: ``providers.azure.group``)."""
        group = ensure_group(self.arm, self.rg, location)
        return location or str(group["location"])

    def _account(self, name: str, location: str, tags: dict[str, str], *, user_named: bool) -> None:
        arm, rg = self.arm, self.rg
        found = self._get(lambda: arm.storage.storage_accounts.get_properties(rg, name), f"find storage account {name}")
        if found is not None:
            if not user_named and (found.get("tags") or {}).get(ba.TAG_MANAGED) != "true":
                raise ProviderError(
                    "azure",
                    f"storage account {name} in {rg} was not made by spotfleet: name the "
                    "account to use in providers.azure.storage_account",
                    code="foreign-storage-account",
                )
            weak = ba.insecure_settings(found)
            if weak:
                log.warning("azure: storage account %s allows %s; checkpoints should not", name, ", ".join(weak))
            return
        answer = wire(
            arm.call(
                lambda: arm.storage.storage_accounts.check_name_availability(
                    {"name": name, "type": "Microsoft.Storage/storageAccounts"}
                ),
                f"check storage account name {name}",
            )
        )
        if not answer.get("nameAvailable", answer.get("name_available")):
            raise ProviderError(
                "azure",
                f"storage account name {name} is not available to resource group {rg} "
                f"({answer.get('message') or answer.get('reason')}): set providers.azure."
                "storage_account to an account in this resource group or a free name",
                code="storage-account-taken",
            )
        arm.call(
            lambda: arm.storage.storage_accounts.begin_create(rg, name, ba.account_body(location, tags)).result(),
            f"create storage account {name}",
        )

    def _container(self, account: str, container: str) -> str:
        arm, rg = self.arm, self.rg
        found = self._get(
            lambda: arm.storage.blob_containers.get(rg, account, container), f"find container {container}"
        )
        if found is None:
            found = wire(
                arm.call(
                    lambda: arm.storage.blob_containers.create(
                        rg, account, container, {"properties": {"publicAccess": "None"}}
                    ),
                    f"create container {container}",
                )
            )
        return str(found["id"])

    def _lifecycle(self, account: str, spec: StorageSpec) -> None:
        arm, rg = self.arm, self.rg
        found = self._get(
            lambda: arm.storage.management_policies.get(rg, account, "default"), f"find lifecycle policy of {account}"
        )
        existing = list((((found or {}).get("properties") or {}).get("policy") or {}).get("rules") or [])
        name = ba.rule_name(spec.bucket, spec.prefix)
        rule = ba.lifecycle_rule(spec.bucket, spec.prefix, spec.expire_days) if spec.expire_days else None
        rules = ba.merged_rules(existing, name, rule)
        if rules == existing:
            return
        if rules:
            arm.call(
                lambda: arm.storage.management_policies.create_or_update(
                    rg, account, "default", {"properties": {"policy": {"rules": rules}}}
                ),
                f"set lifecycle policy of {account}",
            )
        else:
            arm.call(
                lambda: arm.storage.management_policies.delete(rg, account, "default"),
                f"delete lifecycle policy of {account}",
            )

    def _by_id(self, rid: str, api_version: str, what: str) -> dict[str, Any] | None:
        return self._get(lambda: self.arm.resources.resources.get_by_id(rid, api_version=api_version), what)

    def _identity(self, name: str, location: str, tags: dict[str, str]) -> dict[str, Any]:
        arm, rid = self.arm, ba.identity_id(self.arm.subscription, self.rg, name)
        found = self._by_id(rid, ba.IDENTITY_API, f"find identity {name}")
        if found is None:
            found = wire(
                arm.call(
                    lambda: arm.resources.resources.begin_create_or_update_by_id(
                        rid, {"location": location, "tags": tags}, api_version=ba.IDENTITY_API
                    ).result(),
                    f"create identity {name}",
                )
            )
        return dict(found.get("properties") or {})

    def _role(self, scope: str, principal: str) -> None:
        arm = self.arm
        rid = f"{scope}/providers/Microsoft.Authorization/roleAssignments/{ba.role_assignment_name(scope, principal)}"
        if self._by_id(rid, ba.ROLE_API, "find role assignment") is not None:
            return
        try:
            arm.call(
                lambda: arm.resources.resources.begin_create_or_update_by_id(
                    rid, ba.role_assignment_body(arm.subscription, principal), api_version=ba.ROLE_API
                ).result(),
                "allow the node identity on the container",
            )
        except ProviderError as err:
            if err.code != "RoleAssignmentExists":  # the same grant under another name: fine
                raise

    # ---- launch -------------------------------------------------------------------------------
    def node_identity(self, checkpoint_uri: str) -> tuple[str, str] | None:
        """(identity resource id, client id) for VMs writing to ``checkpoint_uri``; None when the URI
        does not name an account (connection-string storage, or none)."""
        container, account = ba.account_from_uri(checkpoint_uri)
        if not account:
            return None
        name = ba.identity_name(account, container)
        rid = ba.identity_id(self.arm.subscription, self.rg, name)
        found = self._by_id(rid, ba.IDENTITY_API, f"find identity {name}")
        if found is None:
            raise ProviderError(
                "azure",
                f"node identity {name} does not exist in {self.rg}: run `fleet up` again "
                "(it creates the checkpoint storage and the identity first)",
                code="no-node-identity",
            )
        return str(found["id"]), str((found.get("properties") or {})["clientId"])
