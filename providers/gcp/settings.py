"""``providers.gcp`` settings in a spec: the common keys plus GCP's own."""

from __future__ import annotations

from pydantic import Field

from fleet.spec import ProviderSettings


class GcpSettings(ProviderSettings):
    project: str = Field(default="", description="GCP: project id; default from the environment's credentials.")
