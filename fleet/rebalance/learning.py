"""Learning each pool's interruption rate from what this fleet saw (pure).

The catalog's estimate ``r0`` (interruptions per instance-hour) is a Gamma prior with mean
``r0`` and the weight of ``prior_hours`` instance-hours: ``Gamma(alpha=r0*prior_hours,
beta=prior_hours)``. Interruptions are Poisson in exposure, so after ``k`` interruptions
in ``T`` instance-hours the posterior is ``Gamma(alpha + k, beta + T)`` and its mean
``(r0*prior_hours + k) / (prior_hours + T)`` replaces the estimate. Little exposure leaves
the catalog's figure almost untouched; much exposure lets the fleet's own record win.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from fleet.model import InterruptionSource, Market, Offer
from fleet.rebalance.types import Exposure


def posterior_rate(prior_rate: float, prior_hours: float, exposure: Exposure) -> float:
    """Posterior mean interruptions per instance-hour (see the module doc)."""
    return (prior_rate * prior_hours + exposure.interruptions) / (prior_hours + exposure.hours)


def learned_offers(offers: Sequence[Offer], exposure: Mapping[str, Exposure], prior_hours: float) -> list[Offer]:
    """``offers`` with each spot pool's rate updated from ``exposure`` (pool id -> what we saw);
    pools this fleet never ran in keep the catalog's estimate."""
    out = []
    for o in offers:
        seen = exposure.get(o.pool.id)
        if o.market is Market.SPOT and seen is not None and (seen.hours > 0 or seen.interruptions):
            rate = posterior_rate(o.interruptions_per_hour, prior_hours, seen)
            o = o.model_copy(
                update={"interruptions_per_hour": rate, "interruption_source": InterruptionSource.OBSERVED}
            )
        out.append(o)
    return out


def exposure_of(runs: Iterable[tuple[str, float, float | None, bool]], now: float) -> dict[str, Exposure]:
    """Pool id -> ``Exposure`` from ``(pool, launched_at, ended_at, preempted)`` per instance
    (``ended_at`` ``None`` while alive: it counts until ``now``)."""
    hours: dict[str, float] = {}
    lost: dict[str, int] = {}
    for pool, launched, ended, preempted in runs:
        end = now if ended is None else ended
        hours[pool] = hours.get(pool, 0.0) + max(0.0, end - launched) / 3600.0
        lost[pool] = lost.get(pool, 0) + int(preempted)
    return {p: Exposure(hours=h, interruptions=lost[p]) for p, h in hours.items()}
