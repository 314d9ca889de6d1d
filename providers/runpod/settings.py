"""``providers.runpod`` settings in a spec: the common keys plus RunPod's own."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fleet.spec import ProviderSettings


class RunPodSettings(ProviderSettings):
    clouds: list[Literal["SECURE", "COMMUNITY"]] = Field(
        default_factory=lambda: ["SECURE", "COMMUNITY"],
        min_length=1,
        description="RunPod: clouds to rent from: SECURE (RunPod's data centers) and/or COMMUNITY "
        "(vetted third-party hosts, cheaper).",
    )
    disk_gb: int = Field(
        default=50,
        ge=1,
        le=10_000,
        description="RunPod: container disk per pod, GB "
        "(wiped when the pod restarts; checkpoints go to the fleet's bucket).",
    )
