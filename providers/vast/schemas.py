"""The Vast.ai answers the adapter reads, as schemas (``providers.kit.responses`` reads them).

Only what the adapter relies on is required; vendors add fields, so extra ones are kept (rows
stay plain dicts for ``providers.vast.instances`` and ``providers.vast.offers``). A 200 that
does not fit is ``MalformedResponseError``, never "no instances" or "no offers".
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class InstanceRow(_Answer):
    """One row of ``GET /api/v1/instances/`` or ``GET /api/v0/instances/{id}/``."""

    id: int
    label: str | None = None


class InstancePage(_Answer):
    """``GET /api/v1/instances/``: one page of the account's instances."""

    instances: list[InstanceRow]
    next_token: str | None = None
    total_instances: int | None = None

    def rows(self) -> list[dict[str, Any]]:
        return [r.model_dump() for r in self.instances]


class InstanceShow(_Answer):
    """``GET /api/v0/instances/{id}/?owner=me``: ``instances`` is one row (a list of one in older answers)."""

    instances: InstanceRow | list[InstanceRow] | None

    def row(self) -> dict[str, Any] | None:
        got = self.instances
        if isinstance(got, list):
            got = got[0] if got else None
        return got.model_dump() if got is not None else None


class OfferPage(_Answer):
    """``POST /api/v0/bundles/``: the search's offers (each row read by ``providers.vast.offers``)."""

    offers: list[dict[str, Any]]


class CreateAnswer(_Answer):
    """``PUT /api/v0/asks/{id}/``: ``new_contract`` is the instance made (also on a refused bid)."""

    success: bool | None = None
    new_contract: int | None = None
    error: str | None = None
    msg: str | None = None
