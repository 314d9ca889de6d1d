"""Bid prices and interruption estimates for Vast.ai interruptible offers (pure: no I/O).

A Vast interruptible instance runs while its bid is the highest on the machine; the host's
``min_bid`` is the current price to beat. We bid ``min_bid x (1 + margin)``, never above
``max_fraction_of_on_demand`` of the machine's on-demand compute price nor the spec's $/GPU-h
cap (less the storage the instance bills). All prices are $/h for the whole machine.
"""

from __future__ import annotations

import math

from fleet.spec import VastBid

#: Outbid rate per hour of a bid sitting exactly at ``min_bid`` (the catalog's Vast prior).
OUTBID_AT_MIN_PER_HOUR = 0.25
#: The margin over ``min_bid`` at which the outbid rate falls by a factor e.
MARGIN_SCALE = 0.15
#: Hours over which ``reliability2`` (a share of time the host was up) is spread.
RELIABILITY_HORIZON_HOURS = 24.0
#: No interruptible offer is estimated below this rate.
FLOOR_PER_HOUR = 0.01


def bid_cap(
    on_demand_compute: float, gpus: int, storage_per_hour: float, bid: VastBid, max_per_gpu_hour: float | None
) -> float:
    """The most we bid for this machine ($/h)."""
    cap = on_demand_compute * bid.max_fraction_of_on_demand
    if max_per_gpu_hour is not None:
        cap = min(cap, max_per_gpu_hour * gpus - storage_per_hour)
    return cap


def bid_price(min_bid: float, cap: float, bid: VastBid) -> float | None:
    """``min_bid x (1 + margin)`` within ``cap``; None when even ``min_bid`` is above the cap."""
    if min_bid <= 0 or cap < min_bid:
        return None
    return round(min(min_bid * (1 + bid.margin), cap), 4)


def interruptions_per_hour(reliability: float, bid: float, min_bid: float) -> float:
    """Expected interruptions per instance-hour: host downtime plus being outbid.

    Host part: ``-ln(reliability2) / 24`` (reliability2 read as the chance to stay up a day).
    Outbid part: ``0.25/h`` at ``min_bid``, falling by e every 15 % of margin above it.
    A heuristic prior, not a measurement; the fleet's own history refines it.
    """
    r = min(max(reliability, 1e-6), 1.0)
    host = -math.log(r) / RELIABILITY_HORIZON_HOURS
    margin = max(0.0, bid / min_bid - 1) if min_bid > 0 else 0.0
    outbid = OUTBID_AT_MIN_PER_HOUR * math.exp(-margin / MARGIN_SCALE)
    return round(max(FLOOR_PER_HOUR, host + outbid), 5)
