"""What adapters for rented hosts share: vendors without tags and hosts without a cloud identity
(Vast.ai, RunPod).

* :class:`Label`: where a vendor has no tags, one text carries what tags would,
  ``spotfleet|<fleet>|<pool id>|<plan id>|<token>|<count>``: the fleet and pool (discovery), the
  plan, and the launch token with its count (idempotency: list by label before creating). Each
  adapter says where it keeps it (Vast: the instance's ``label``; RunPod: a pod variable);
  :func:`extra_tags` are the tags it cannot carry (they travel as JSON beside it).

How such a host reaches the fleet's checkpoint store is ``providers.kit.node_store``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.model import TAG_FLEET, TAG_PLAN, TAG_POOL, LaunchRequest, PoolKey

LABEL_PREFIX = "spotfleet"
_SEP = "|"


@dataclass(frozen=True)
class Label:
    fleet: str
    pool: str
    plan: str
    token: str
    count: int

    def render(self) -> str:
        return _SEP.join((LABEL_PREFIX, self.fleet, self.pool, self.plan, self.token, str(self.count)))

    @classmethod
    def parse(cls, text: Any, provider: str = "") -> Label | None:
        """The label's parts; None for a label spotfleet did not write (or, with ``provider``, one
        whose pool is another provider's)."""
        parts = str(text or "").split(_SEP)
        if len(parts) != 6 or parts[0] != LABEL_PREFIX or not parts[1] or not parts[4]:
            return None
        try:
            pool = PoolKey.from_id(parts[2])
            if provider and pool.provider != provider:
                return None
            return cls(parts[1], parts[2], parts[3], parts[4], int(parts[5]))
        except (ValueError, TypeError):
            return None

    @classmethod
    def of(cls, request: LaunchRequest) -> Label:
        """The label of every instance ``request`` makes."""
        return cls(request.fleet, request.offer.pool.id, request.tags.get(TAG_PLAN, ""), request.token, request.count)


def extra_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The tags a label cannot carry (everything but fleet, pool and plan)."""
    return {k: v for k, v in sorted(tags.items()) if k not in (TAG_FLEET, TAG_POOL, TAG_PLAN)}
