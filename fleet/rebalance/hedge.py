"""Hedging (pure): spare spot capacity sized from the learned hazard, spread so that no zone
holds more than the spares cover.

With ``rebalance.hedge: true`` a pass plans ``target + spares`` weighted GPUs, where

* ``spares`` is the expected capacity lost within one cold start (``cold_start_seconds``):
  the sum over the fleet's spot nodes of weight x learned interruption rate x cold start,
  rounded up, and at least one node (the largest spot node on offer), at most the target;
* every pool and zone holds at most ``spares`` of the spot part (``max_pool_share`` and
  ``max_zone_share`` are lowered to ``spares / (target + spares)`` where they were higher),
  so the loss of any one zone leaves the fleet at target while the replacements start.

The spec's target stays what "at target" means; only the plan grows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from fleet.model import Market, Offer
from fleet.rebalance.types import ObservedInstance
from fleet.spec import FleetSpec


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
