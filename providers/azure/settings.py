"""``providers.azure`` settings in a spec: the common keys plus Azure's own."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fleet.spec import ProviderSettings


class AzureSettings(ProviderSettings):
    subscription_id: str = ""
    resource_group: str = ""
    launch_mode: Literal["vms", "scale-set"] = Field(
        default="vms",
        description="Azure: vms (one Spot VM per instance) or scale-set (one Flexible scale set "
        "per region with a Spot priority mix; pools become regional).",
    )
    eviction_policy: Literal["Delete", "Deallocate"] = Field(
        default="Delete",
        description=(
            "Azure: what an evicted Spot VM becomes: Delete (gone with its disks) or Deallocate (kept, "
            "billing its disks, until `fleet down`)."
        ),
    )
    storage_account: str = Field(
        default="",
        description=(
            "Azure: storage account for checkpoints (created if missing); default derived from subscription, "
            "resource group and container."
        ),
    )
    prices_url: str = Field(
        default="https://prices.azure.com/api/retail/prices",
        description=(
            "Azure: the Retail Prices API endpoint the billed rate of each VM is read from (its size's Linux "
            "Spot or on-demand consumption price in its region); $SPOTFLEET_AZURE_PRICES_URL stands in when this "
            "is not set."
        ),
    )
