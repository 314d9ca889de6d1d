"""``providers.aws`` settings in a spec: the common keys plus AWS's own."""

from __future__ import annotations

from pydantic import Field

from fleet.spec import ProviderSettings


class AwsSettings(ProviderSettings):
    subnets: dict[str, str] = Field(default_factory=dict, description="AWS: zone -> subnet id.")
    ami: str = Field(default="", description="AWS: image id; default the Deep Learning Base AMI.")
