"""Vast.ai outbids (pure): raise the bid within the spec's cap, or replace the instance.

An interruptible Vast instance whose bid is beaten is stopped until its bid is raised.
:func:`outbid_action` raises it to the pool's current minimum bid plus the spec's margin,
capped at ``max_fraction_of_on_demand`` of the on-demand price, when the provider can raise
bids (``providers.base.RaisesBids``) and the raised price per weighted GPU is no dearer than the
cheapest spot replacement the planner may use; otherwise it returns ``None`` and the
instance is replaced like any lost node. Adapters implement ``RaiseBid``; nothing here
talks to Vast.
"""

from __future__ import annotations

from fleet.model import Offer
from fleet.rebalance.types import ObservedInstance, RaiseBid
from fleet.spec import VastBid


def bid_cap(offer: Offer, settings: VastBid) -> float | None:
    """The highest bid the spec allows in ``offer``'s pool; ``None`` without an on-demand price."""
    if offer.on_demand_price is None:
        return None
    return offer.on_demand_price * settings.max_fraction_of_on_demand


def outbid_action(
    inst: ObservedInstance,
    offer: Offer | None,
    settings: VastBid,
    weight: float,
    replacement_per_weighted_gpu: float | None,
) -> RaiseBid | None:
    """``RaiseBid`` for ``inst`` when raising beats replacing (see the module doc), else ``None``.

    ``offer``: the pool's offer now (its price is the minimum bid); ``weight``: the instance's
    weighted GPUs; ``replacement_per_weighted_gpu``: $/h per weighted GPU of the cheapest
    replacement, ``None`` when there is none (then raising within the cap always wins).
    """
    if offer is None or weight <= 0:
        return None
    cap = bid_cap(offer, settings)
    if cap is None:
        return None
    bid = round(offer.price_per_hour * (1 + settings.margin), 6)
    if bid > cap:
        if offer.price_per_hour > cap:
            return None
        bid = cap
    if replacement_per_weighted_gpu is not None and bid / weight > replacement_per_weighted_gpu:
        return None
    return RaiseBid(instance_id=inst.id, pool=inst.pool, bid=bid, cap=cap)
