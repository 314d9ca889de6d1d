"""``providers.vast`` settings in a spec: the common keys plus Vast.ai's own (host filters, bid)."""

from __future__ import annotations

from pydantic import Field

from fleet.spec import ProviderSettings, VastBid


class VastSettings(ProviderSettings):
    bid: VastBid = Field(default_factory=VastBid)
    min_reliability: float = Field(default=0.95, ge=0, le=1)
    countries: list[str] | None = Field(default=None, description="Vast: allowed host countries (ISO codes).")
    exclude_countries: list[str] = Field(default_factory=list, description="Vast: host countries to skip.")
    min_download_mbps: float = Field(default=100, ge=0, description="Vast: least host download bandwidth.")
    min_cuda: float = Field(default=12.0, ge=0, description="Vast: least CUDA version the host driver runs.")
    disk_gb: int = Field(default=50, ge=8, le=10_000, description="Vast: container disk per instance, GB.")
