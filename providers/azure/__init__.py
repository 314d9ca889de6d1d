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

from providers.azure.settings import AzureSettings
from providers.kit.record import ProviderRecord, on_call

RECORD = ProviderRecord(
    "azure",
    title="Azure",
    settings=AzureSettings,
    factory=on_call("providers.azure.provider:from_spec"),
    check=on_call("providers.azure.check:check"),
    extra="azure-vm",
    sdk_modules=("azure.core",),
    notice_seconds=30,
    spot=True,
    zones=True,
    checkpoint_scheme="az",
    agent_cloud="azure",
    pulumi_stack="stacks.azure:AzureFleet",
    summary="Azure Spot VMs or Flexible scale sets, Blob checkpoints",
)
