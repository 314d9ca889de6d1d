"""The Lambda Cloud API answers the adapter reads, as schemas (``providers.kit.responses`` reads them).

From the reference's schemas (https://docs-api.lambda.ai/api/cloud, version 1.8.3): every success
is ``{"data": <payload>}``. Only what the adapter relies on is required; the vendor adds fields,
so extra ones are kept. A 200 that does not fit is ``MalformedResponseError``, never "no
instances" or "no offers".
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class Region(_Answer):
    name: str
    description: str = ""


class Specs(_Answer):
    vcpus: int
    memory_gib: int
    storage_gib: int = 0
    gpus: int = Field(ge=0)


class InstanceType(_Answer):
    name: str
    description: str = ""
    gpu_description: str = ""
    price_cents_per_hour: int = Field(ge=0)
    specs: Specs


class TypeItem(_Answer):
    """One entry of ``GET /instance-types``: the type and the regions with capacity now."""

    instance_type: InstanceType
    regions_with_capacity_available: list[Region]


class InstanceTypes(_Answer):
    data: dict[str, TypeItem]


class Tag(_Answer):
    key: str
    value: str


class Instance(_Answer):
    """One instance (``GET /instances``, ``GET /instances/{id}``, terminate's answer)."""

    id: str = Field(min_length=1)
    name: str | None = None
    status: str
    ip: str | None = None
    private_ip: str | None = None
    region: Region
    instance_type: InstanceType
    ssh_key_names: list[str] = []
    tags: list[Tag] = []

    def tag_map(self) -> dict[str, str]:
        return {t.key: t.value for t in self.tags}


class Instances(_Answer):
    data: list[Instance]


class InstanceAnswer(_Answer):
    data: Instance


class LaunchData(_Answer):
    instance_ids: list[str]


class LaunchAnswer(_Answer):
    data: LaunchData


class TerminateData(_Answer):
    terminated_instances: list[Instance]


class TerminateAnswer(_Answer):
    data: TerminateData


class SSHKey(_Answer):
    id: str
    name: str
    public_key: str


class SSHKeys(_Answer):
    data: list[SSHKey]


class SSHKeyAnswer(_Answer):
    data: SSHKey
