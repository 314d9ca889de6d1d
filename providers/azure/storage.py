"""``ensure_bucket`` on Azure: a private Blob container for checkpoints (``az://container``).

The storage account is the one nodes write to: ``AZURE_STORAGE_CONNECTION_STRING`` (the same
variable ``fleet.checkpoint.stores.azure`` reads; Azurite's in tests). The container is created
without public access; an existing one is accepted (idempotent). Creating the storage account
itself through ARM is not done here: name an existing account.
"""

from __future__ import annotations

import re
from typing import Mapping

from fleet.errors import AuthError, ProviderError
from providers.base import BucketRef, StorageSpec

CONNECTION_ENV = "AZURE_STORAGE_CONNECTION_STRING"
#: Azure container names: 3-63 lowercase letters, digits and single dashes, starting alphanumeric.
CONTAINER = re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")


def ensure_container(spec: StorageSpec, environ: Mapping[str, str]) -> BucketRef:
    """The container ``spec.bucket``, created if missing; raises ProviderError naming the fix."""
    if not CONTAINER.match(spec.bucket):
        raise ProviderError("azure", f"container name {spec.bucket!r} is not valid: use 3-63 lowercase letters, "
                            "digits and single dashes", code="invalid-bucket-name")
    conn = environ.get(CONNECTION_ENV, "")
    if not conn:
        raise AuthError("azure", f"checkpoint container {spec.bucket!r}: set {CONNECTION_ENV} to the storage "
                        "account nodes write checkpoints to", code="no-storage-account")
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
