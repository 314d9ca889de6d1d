"""``providers.gcp`` settings in a spec: the common keys plus GCP's own."""

from __future__ import annotations

from pydantic import Field

from fleet.spec import ProviderSettings


class GcpSettings(ProviderSettings):
    project: str = Field(default="", description="GCP: project id; default from the environment's credentials.")
    billing_url: str = Field(
        default="https://cloudbilling.googleapis.com",
        description=(
            "GCP: the Cloud Billing Catalog endpoint each VM's billed rate is composed from (its machine type's "
            "cores, memory and GPUs; no disk or network); $SPOTFLEET_GCP_BILLING_ENDPOINT stands in when this is "
            "not set."
        ),
    )
