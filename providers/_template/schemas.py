"""The shapes of Acme's answers (anything else is MalformedResponseError, never an empty list)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class AcmeInstance(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str
    name: str
    status: str
    instance_type: str
    region: str


class InstanceList(BaseModel):
    data: list[AcmeInstance]


class LaunchAnswer(BaseModel):
    instance_ids: list[str]
