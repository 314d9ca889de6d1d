"""The Azure adapter (``pip install 'spotfleet[azure]'``): individual Spot VMs through ARM, registered as ``azure``.

Credentials: ``DefaultAzureCredential`` (azure-identity). Subscription from the spec
(``providers.azure.subscription_id``) or ``$AZURE_SUBSCRIPTION_ID``; resource group from the spec
(``providers.azure.resource_group``, default ``spotfleet``; created if missing).
``providers.azure.launch_mode: scale-set`` launches one Flexible Spot-priority-mix scale set per
region instead of single VMs (``providers.azure.scaleset_provider``).
``$SPOTFLEET_AZURE_ARM_ENDPOINT`` points it at another ARM endpoint (a loopback ``http://`` one needs
no credential), ``$SPOTFLEET_AZURE_POLLING_INTERVAL`` sets the seconds between operation polls.
Checkpoint storage (``providers.azure.storage``): an account, container, lifecycle rule and node
identity made through ARM (``providers.azure.storage_account`` names the account), or a container in
the account of ``$AZURE_STORAGE_CONNECTION_STRING`` when that is set.
"""

from __future__ import annotations

from fleet.spec import FleetSpec, ProviderSettings
from providers.registry import register_cloud_adapter, require_sdk

require_sdk("azure.core")      # fail early, naming the extra; the SDK is imported when a call needs it

from providers.azure.check import check  # noqa: E402
from providers.azure.provider import AzureProvider  # noqa: E402


def build(spec: FleetSpec, settings: ProviderSettings) -> AzureProvider:
    """The adapter for ``spec``'s Azure settings (``launch_mode: scale-set`` -> one scale set per region)."""
    if settings.launch_mode == "scale-set":
        from providers.azure.scaleset_provider import AzureScaleSetProvider

        return AzureScaleSetProvider(settings)
    return AzureProvider(settings)


register_cloud_adapter("azure", build, check=check)

__all__ = ["AzureProvider", "build"]
