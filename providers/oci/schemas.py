"""The parts of OCI's answers the adapter reads, as pydantic models (vendors add fields: extra
fields are allowed; a missing or mistyped field the adapter needs is MalformedResponseError).

From the Core Services API reference (https://docs.oracle.com/iaas/api/#/en/iaas/20160918/):
``Instance``, ``Shape``; and Identity's ``AvailabilityDomain``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictStr


class _Row(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class AvailabilityDomain(_Row):
    name: StrictStr = Field(min_length=1)


class ShapeRow(_Row):
    shape: StrictStr = Field(min_length=1)
    gpus: int | None = None
    gpu_description: str | None = Field(default=None, alias="gpuDescription")
    ocpus: float | None = None
    memory_in_gbs: float | None = Field(default=None, alias="memoryInGBs")


class PreemptionAction(_Row):
    type: StrictStr


class PreemptibleConfig(_Row):
    preemption_action: PreemptionAction = Field(alias="preemptionAction")


class InstanceRow(_Row):
    id: StrictStr = Field(min_length=1)
    compartment_id: StrictStr = Field(alias="compartmentId")
    availability_domain: StrictStr = Field(alias="availabilityDomain")
    shape: StrictStr
    lifecycle_state: StrictStr = Field(alias="lifecycleState")
    time_created: StrictStr = Field(alias="timeCreated")
    display_name: str | None = Field(default=None, alias="displayName")
    freeform_tags: dict[str, StrictStr] | None = Field(default=None, alias="freeformTags")
    preemptible_instance_config: PreemptibleConfig | None = Field(default=None, alias="preemptibleInstanceConfig")
