"""The RunPod REST v2 answers the adapter reads, as schemas (``providers.kit.responses`` reads them).

Written from the v2 OpenAPI document (``Pod``, ``ListPodsResponse``, ``GpuType``,
``ListGpuTypesResponse``); only what the adapter relies on is required, vendors add fields, so
extra ones are kept. A 200 that does not fit is ``MalformedResponseError``, never "no pods".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["PROVISIONING", "STARTING", "RUNNING", "EXITED", "ERROR", "TERMINATED"]
Level = Literal["NONE", "LOW", "MEDIUM", "HIGH"]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class PodGpu(_Answer):
    id: str
    count: int = Field(default=1, ge=1)


class Pod(_Answer):
    """One pod (``GET /v2/pods/{id}``, a row of ``GET /v2/pods``, the ``201`` of a create)."""

    id: str = Field(min_length=1)
    name: str
    status: Status
    gpu: PodGpu | None = None
    cloud: Literal["SECURE", "COMMUNITY"] | None = None
    dataCenterId: str | None = None  # noqa: N815 (the vendor's field name)
    cost: float | None = None
    env: dict[str, Any] = Field(default_factory=dict)
    createdAt: str | None = None  # noqa: N815
    runtime: dict[str, Any] | None = None


class PodList(_Answer):
    """``GET /v2/pods``."""

    pods: list[Pod]


class CloudPrices(_Answer):
    secure: float | None = None
    community: float | None = None


class CloudCounts(_Answer):
    secure: int = 0
    community: int = 0


class DataCenterLevel(_Answer):
    id: str
    availability: Level


class GpuType(_Answer):
    """One row of ``GET /v2/catalog/gpus`` (with ``include=AVAILABILITY&product=POD``)."""

    id: str
    name: str = ""
    memory: int = 0
    price: CloudPrices
    maxCount: CloudCounts  # noqa: N815
    availability: Level | None = None
    dataCenters: list[DataCenterLevel] = Field(default_factory=list)  # noqa: N815


class GpuList(_Answer):
    """``GET /v2/catalog/gpus``."""

    gpus: list[GpuType]
