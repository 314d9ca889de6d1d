"""``providers.lambda`` settings in a spec: the common keys plus Lambda's own (the machine image)."""

from __future__ import annotations

from pydantic import Field

from fleet.spec import ProviderSettings


class LambdaSettings(ProviderSettings):
    image_family: str = Field(
        default="",
        description=(
            "Lambda: the machine image family nodes boot (for example lambda-stack-22-04); empty: Lambda's "
            "default, the latest Lambda Stack. node.image is not used on Lambda."
        ),
    )
