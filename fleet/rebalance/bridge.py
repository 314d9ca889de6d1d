"""The immediate bridge (pure): on-demand covers capacity that is not ready yet, at once, and
is released as soon as ready capacity covers the target without it.

A lost node's spot replacement needs a cold start before it does work; so does any node of a
fleet that is still coming up. The bridge is rule 9 of ``decide``:

* **Cover**: in the same pass that plans the replacements, on-demand is launched for the
  weighted GPUs that are not ready: ``level - ready - starting on-demand - on-demand launched
  now``, where ``level`` is the critical level (``rebalance.critical_gpus``, at most the
  target): the on-demand the user allows when spot is short. Only with ``rebalance.bridge:
  true`` (it buys on-demand for every loss; a fleet whose critical level is its on-demand
  baseline gets no bridge either way).
* **Release**: an on-demand node above the fleet's on-demand level is terminated once the ready
  capacity without it still covers the target (make before break: what replaces it is already
  doing work), newest first, so the bridge costs one cold start of on-demand per loss.

Readiness comes from ``ObservedInstance.starting`` (a provider's pending state; a simulator's
cold start).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from fleet.model import Market, Offer
from fleet.rebalance.types import ObservedInstance

EPS = 1e-9
Weight = Callable[[ObservedInstance], float]


def ready_weight(instances: Sequence[ObservedInstance], weight: Weight) -> float:
    """Weighted GPUs of the instances that are doing work (past their cold start)."""
    return sum(weight(i) for i in instances if not i.starting)


def cover(
    level: float,
    healthy: Sequence[ObservedInstance],
    weight: Weight,
    od_adds_weight: float,
    on_demand: Sequence[Offer],
    offer_weight: Callable[[Offer], float],
) -> dict[str, int]:
    """On-demand launches (pool -> count) bridging what is not ready up to ``level`` weighted
    GPUs, in the cheapest on-demand pool per weighted GPU; nothing when none is offered."""
    starting_od = sum(weight(i) for i in healthy if i.starting and i.market is Market.ON_DEMAND)
    need = level - ready_weight(healthy, weight) - starting_od - od_adds_weight
    offers = [o for o in on_demand if o.market is Market.ON_DEMAND and offer_weight(o) > 0 and o.capacity_hint != 0]
    if need <= EPS or not offers:
        return {}
    best = min(offers, key=lambda o: (o.price_per_hour / offer_weight(o), o.pool.id))
    return {best.pool.id: math.ceil(need / offer_weight(best) - EPS)}


def releases(
    target: float, on_demand_level: float, healthy: Sequence[ObservedInstance], weight: Weight
) -> list[ObservedInstance]:
    """On-demand nodes to terminate now (see the module doc): each one leaves the ready fleet
    at or above ``target`` and on-demand at or above ``on_demand_level``."""
    ready = ready_weight(healthy, weight)
    od = sum(weight(i) for i in healthy if i.market is Market.ON_DEMAND)
    out = []
    candidates = sorted(
        (i for i in healthy if i.market is Market.ON_DEMAND), key=lambda i: (not i.starting, -i.launched_at, i.id)
    )
    for inst in candidates:
        w = weight(inst)
        lose_ready = 0.0 if inst.starting else w
        if ready - lose_ready >= target - EPS and od - w >= on_demand_level - EPS:
            out.append(inst)
            ready -= lose_ready
            od -= w
    return out
