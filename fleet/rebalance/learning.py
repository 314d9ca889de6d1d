"""Learning each pool's interruption rate from what this fleet saw (pure).

The catalog's estimate ``r0`` (interruptions per instance-hour) is a Gamma prior with mean
``r0`` and the weight of ``prior_hours`` instance-hours: ``Gamma(alpha=r0*prior_hours,
beta=prior_hours)``. Interruptions are Poisson in exposure, so after ``k`` interruptions
in ``T`` instance-hours the posterior is ``Gamma(alpha + k, beta + T)`` and its mean
``(r0*prior_hours + k) / (prior_hours + T)`` replaces the estimate. Little exposure leaves
the catalog's figure almost untouched; much exposure lets the fleet's own record win.

What a loss costs: the planner prices a spot pool at ``price x F(rate)``, where ``F`` counts
the work lost since the last checkpoint and ``workload.restart_seconds`` per interruption.
A rebalancer's lost node also waits for its replacement's boot, so with
``rebalance.charge_cold_start`` :func:`loss_priced` plans with the restart plus
``rebalance.cold_start_seconds``: a zone that drops many times a day then costs what its
losses cost and the fleet leaves it. Only ``decide`` plans with it; ``fleet plan`` keeps the
workload's own figure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from fleet.model import InterruptionSource, Market, Offer
from fleet.rebalance.types import Exposure
from fleet.spec import FleetSpec


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


def loss_priced(spec: FleetSpec) -> FleetSpec:
    """``spec`` whose restart also counts the replacement's cold start, with
    ``rebalance.charge_cold_start`` (see the module doc); else ``spec`` itself."""
    policy = spec.rebalance
    if not policy.charge_cold_start or policy.cold_start_seconds <= 0:
        return spec
    restart = spec.workload.restart_seconds + policy.cold_start_seconds
    return spec.model_copy(update={"workload": spec.workload.model_copy(update={"restart_seconds": restart})})


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
