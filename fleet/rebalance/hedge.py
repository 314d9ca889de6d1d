"""Hedging (pure): spare spot capacity sized from the learned hazard, spread so that no zone
holds more than the spares cover.

With ``rebalance.hedge: true`` a pass plans ``target + spares`` weighted GPUs, where

* ``spares`` is the expected capacity lost within one cold start (``cold_start_seconds``):
  the sum over the fleet's spot nodes of weight x learned interruption rate x cold start,
  rounded up, and at least one node (the largest spot node on offer), at most the target;
* every pool and zone holds at most ``spares`` of the spot part (``max_pool_share`` and
  ``max_zone_share`` are lowered to ``spares / (target + spares)`` where they were higher),
  so the loss of any one zone leaves the fleet at target while the replacements start;
* every **correlated group** holds at most ``spares`` spot weighted GPUs too: the zones of the
  pools that interrupted this fleet within ``CO_FAILURE_SECONDS`` of each other (one pass),
  seen within ``backoff_memory_seconds``; each group is a ``Quota`` over its zones
  (``Quota.zones``, one per provider it spans) with ``spares`` divided by the largest weight
  per GPU on offer as its GPU limit, so no group that failed together can take more than the
  spares cover.

The spec's target stays what "at target" means; only the plan grows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fleet.model import Market, Offer, PoolKey, Quota, QuotaUnit
from fleet.rebalance.types import INTERRUPTED, ObservedInstance, PoolEvent
from fleet.spec import FleetSpec

#: Interruptions this close in time are one co-failure (one pass of ``fleet rebalance``; the
#: simulator stamps a tick's losses with one time).
CO_FAILURE_SECONDS = 60.0


def spares(spec: FleetSpec, offers: Sequence[Offer], healthy: Sequence[ObservedInstance]) -> int:
    """Spare weighted GPUs for ``spec``'s fleet (see the module doc); ``offers`` carry the
    learned rates."""
    rate = {o.pool.id: o.interruptions_per_hour for o in offers}
    spot = [o for o in offers if o.market is Market.SPOT and spec.weight(o.accelerator) * o.gpus > 0]
    if not spot:
        return 0
    hours = spec.rebalance.cold_start_seconds / 3600
    expected = sum(
        spec.weight(i.accelerator) * i.gpus * rate.get(i.pool, 0.0) * hours for i in healthy if i.market is Market.SPOT
    )
    node = max(spec.weight(o.accelerator) * o.gpus for o in spot)
    target = spec.capacity.gpus
    return int(min(target, max(node, math.ceil(expected - 1e-9))))


def hedged(spec: FleetSpec, spare: int) -> FleetSpec:
    """``spec`` planning ``spare`` more weighted GPUs with no pool or zone above ``spare``."""
    if spare <= 0:
        return spec
    gpus = spec.capacity.gpus + spare
    share = spare / max(1, gpus - spec.capacity.on_demand_gpus)
    div = spec.diversification
    return spec.model_copy(
        update={
            "capacity": spec.capacity.model_copy(update={"gpus": gpus}),
            "diversification": div.model_copy(
                update={
                    "max_pool_share": min(div.max_pool_share, share),
                    "max_zone_share": min(div.max_zone_share, share),
                }
            ),
            "rebalance": spec.rebalance.model_copy(update={"hedge": False}),
        }
    )


def _zone(pool: str) -> str:
    key = PoolKey.from_id(pool)
    return f"{key.provider}/{key.region}/{key.zone or '-'}"


def correlated_groups(events: Sequence[PoolEvent], now: float, memory_seconds: float) -> list[frozenset[str]]:
    """The sets of two or more zones (``provider/region/zone``) whose pools interrupted this
    fleet within ``CO_FAILURE_SECONDS`` of each other, over the last ``memory_seconds``; a set
    inside another is left out (the larger one's cap covers it)."""
    hits = sorted(
        (e.at, _zone(e.pool)) for e in events if e.kind == INTERRUPTED and now - memory_seconds <= e.at <= now
    )
    found: set[frozenset[str]] = set()
    start: float | None = None
    zones: set[str] = set()
    for at, zone in [*hits, (float("inf"), "")]:
        if start is None or at - start > CO_FAILURE_SECONDS:
            if len(zones) >= 2:
                found.add(frozenset(zones))
            start, zones = at, set()
        zones.add(zone)
    return sorted((g for g in found if not any(g < h for h in found)), key=sorted)


def group_caps(
    spec: FleetSpec,
    offers: Sequence[Offer],
    healthy: Sequence[ObservedInstance],
    groups: Sequence[frozenset[str]],
    spare: int,
) -> list[Quota]:
    """One spot ``Quota`` per group and provider: at most ``spare`` weighted GPUs there (see the
    module doc); ``in_use`` is what the healthy fleet runs there, so the cap is the spares."""
    per_gpu = max((spec.weight(o.accelerator) for o in offers if o.market is Market.SPOT), default=0.0)
    if spare <= 0 or per_gpu <= 0:
        return []
    out = []
    for group in groups:
        for provider in sorted({z.split("/", 1)[0] for z in group}):
            zones = tuple(sorted(z for z in group if z.split("/", 1)[0] == provider))
            used = sum(i.gpus for i in healthy if i.market is Market.SPOT and _zone(i.pool) in zones)
            out.append(
                Quota(
                    provider=provider,
                    market=Market.SPOT,
                    unit=QuotaUnit.GPUS,
                    limit=spare / per_gpu,
                    in_use=float(used),
                    zones=zones,
                    name="hedge: zones that failed together",
                )
            )
    return out
