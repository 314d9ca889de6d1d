"""What spot capacity really costs: interruption overhead, checkpoint interval, savings.

Pure functions, no I/O. Rates are interruptions per hour, prices USD per hour, times in
seconds unless a name says otherwise.

The interruption model (seed 000): interruptions arrive as a Poisson process with rate
``lam``, mean time between interruptions ``M = 1/lam``. A job checkpoints every ``tau``
seconds of useful work, a checkpoint takes ``delta`` seconds, a restart ``R`` seconds. On
an interruption the work since the last checkpoint is lost and the job restarts. Daly's
complete model (2006) gives the expected wall time per segment of ``tau`` useful seconds::

    E[T] = M * exp(R/M) * (exp((tau + delta)/M) - 1)

so one useful hour costs ``F = E[T] / tau`` paid hours (``overhead_factor``); to first
order ``F ~ 1 + delta/tau + lam*(tau/2 + R)`` (checkpoint writes + half an interval lost +
the restart), which Young's ``tau = sqrt(2*delta*M)`` minimises. We use Daly's refined
interval, which stays near-optimal when ``delta/M`` is not small.

Workload models (``fleet_true_cost_per_hour``):

* independent nodes: a node's interruption costs that node's lost work and restart, so
  each pool costs ``price * F(lam_pool)`` per hour, linear in the instance counts.
* coupled job: one interruption anywhere stalls every node, so the whole fleet pays
  ``P * F(Lam)`` with ``P`` the fleet's $/h and ``Lam = sum(n_i * lam_i)``. This is not
  linear in the counts. For the planner's MILP we use its tangent plane at a reference
  fleet ``(P0, Lam0)`` (``coupled_node_cost``)::

      P * F(Lam) ~ const + F(Lam0) * P + P0 * F'(Lam0) * Lam
                 = const + sum_i n_i * (F(Lam0) * p_i + P0 * F'(Lam0) * lam_i)

  i.e. a node pays its price inflated by the fleet's overhead, plus, per interruption it
  causes, the whole fleet's price times the work lost fleet-wide (``F'(Lam0) ~ tau/2 + R``
  hours to first order). The planner re-takes this tangent at each plan it finds to get
  good plans fast, then proves or improves them exactly: ``P`` and ``Lam`` are both
  linear, so it walks the (P, Lam) Pareto frontier with MILPs (``fleet.planning.coupled``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from fleet.spec import Workload, WorkloadKind

#: A factor this large means the job makes (almost) no progress; it caps the exponentials.
MAX_OVERHEAD_FACTOR = 1e6
_MAX_EXP = math.log(MAX_OVERHEAD_FACTOR) + 1


# ---- the seed-004 arithmetic -----------------------------------------------------------


@dataclass(frozen=True)
class CostComparison:
    """Expected true cost of a job on spot versus on-demand."""

    spot_cost: float
    on_demand_cost: float

    @property
    def savings(self) -> float:
        return self.on_demand_cost - self.spot_cost

    @property
    def savings_fraction(self) -> float:
        return savings_fraction(self.spot_cost, self.on_demand_cost)


def expected_true_cost(
    compute_hours: float, price_per_hour: float, overhead_fraction: float = 0.0, fixed_costs: float = 0.0
) -> float:
    """Cost of ``compute_hours`` of useful work when interruptions add ``overhead_fraction``
    extra paid time, plus fixed costs (checkpoint storage)."""
    if compute_hours < 0 or price_per_hour < 0 or overhead_fraction < 0 or fixed_costs < 0:
        raise ValueError("hours, price, overhead and fixed costs must be non-negative")
    return compute_hours * price_per_hour * (1 + overhead_fraction) + fixed_costs


def compare_spot_on_demand(
    compute_hours: float, spot_price: float, on_demand_price: float, overhead_fraction: float, storage_cost: float = 0.0
) -> CostComparison:
    """Seed 004's comparison: 1,000 H100-hours at $2.25 spot vs $4.50 on-demand with 10%
    preemption overhead and $50 storage -> $2,525 vs $4,500 (~44% saved)."""
    return CostComparison(
        spot_cost=expected_true_cost(compute_hours, spot_price, overhead_fraction, storage_cost),
        on_demand_cost=expected_true_cost(compute_hours, on_demand_price),
    )


def savings_fraction(cost: float, alternative: float) -> float:
    """``1 - cost/alternative``: the share of the alternative's cost saved (negative: dearer)."""
    if alternative <= 0:
        raise ValueError("the alternative's cost must be positive")
    return 1 - cost / alternative


# ---- checkpoint interval and waste -----------------------------------------------------


def young_interval(checkpoint_seconds: float, mtbi_seconds: float) -> float:
    """Young's first-order optimum ``sqrt(2 * delta * M)`` (seconds of work between checkpoints)."""
    _check_interval_args(checkpoint_seconds, mtbi_seconds)
    return math.sqrt(2 * checkpoint_seconds * mtbi_seconds)


def daly_interval(checkpoint_seconds: float, mtbi_seconds: float) -> float:
    """Daly's higher-order optimum: ``sqrt(2dM) * (1 + sqrt(d/2M)/3 + (d/2M)/9) - d`` for
    ``d < 2M``, else ``M``. Equals Young's to first order when ``d << M``."""
    _check_interval_args(checkpoint_seconds, mtbi_seconds)
    d, m = checkpoint_seconds, mtbi_seconds
    if d >= 2 * m:
        return m
    x = d / (2 * m)
    return math.sqrt(2 * d * m) * (1 + math.sqrt(x) / 3 + x / 9) - d


def _check_interval_args(checkpoint_seconds: float, mtbi_seconds: float) -> None:
    if checkpoint_seconds < 0 or mtbi_seconds <= 0:
        raise ValueError("checkpoint time must be >= 0 and mean time between interruptions > 0")


def time_factor(
    interval_seconds: float, checkpoint_seconds: float, restart_seconds: float, rate_per_hour: float
) -> float:
    """Expected paid time per unit of useful work (>= 1) when checkpointing every
    ``interval_seconds`` under Poisson interruptions (Daly's complete model)."""
    if interval_seconds <= 0:
        raise ValueError("the checkpoint interval must be positive")
    if rate_per_hour <= 0:
        return (interval_seconds + checkpoint_seconds) / interval_seconds
    lam = rate_per_hour / 3600
    a = lam * (interval_seconds + checkpoint_seconds)
    b = lam * restart_seconds
    if a + b > _MAX_EXP:
        return MAX_OVERHEAD_FACTOR
    factor = math.exp(b) * math.expm1(a) / (lam * interval_seconds)
    return min(factor, MAX_OVERHEAD_FACTOR)


def waste_fraction(
    interval_seconds: float, checkpoint_seconds: float, restart_seconds: float, rate_per_hour: float
) -> float:
    """Share of paid time not spent on useful work: checkpoint writes, work lost since the
    last checkpoint, and restarts (``1 - 1/time_factor``)."""
    return 1 - 1 / time_factor(interval_seconds, checkpoint_seconds, restart_seconds, rate_per_hour)


def checkpoint_interval(rate_per_hour: float, workload: Workload) -> float | None:
    """Recommended seconds of work between checkpoints (Daly), ``None`` without interruptions."""
    if rate_per_hour <= 0:
        return None
    seconds = daly_interval(workload.checkpoint_write_seconds, 3600 / rate_per_hour)
    return max(seconds, 1.0)


def overhead_factor(rate_per_hour: float, workload: Workload) -> float:
    """``F(rate)``: paid hours per useful hour at the recommended interval (1 without interruptions)."""
    tau = checkpoint_interval(rate_per_hour, workload)
    if tau is None:
        return 1.0
    return time_factor(tau, workload.checkpoint_write_seconds, workload.restart_seconds, rate_per_hour)


def overhead_factors(rates_per_hour, workload: Workload):
    """``overhead_factor`` of each rate in an array, computed with numpy (the planner's bounds
    evaluate ``F`` on grids of hundreds of rates)."""
    import numpy as np

    rate = np.asarray(rates_per_hour, float)
    d, restart = float(workload.checkpoint_write_seconds), float(workload.restart_seconds)
    positive = rate > 0
    m = np.where(positive, 3600 / np.where(positive, rate, 1.0), 1.0)
    x = d / (2 * m)
    daly = np.where(d >= 2 * m, m, np.sqrt(2 * d * m) * (1 + np.sqrt(x) / 3 + x / 9) - d)
    tau = np.maximum(daly, 1.0)
    lam = np.where(positive, rate, 1.0) / 3600
    a, b = lam * (tau + d), lam * restart
    with np.errstate(over="ignore"):
        factor = np.minimum(
            np.exp(np.minimum(b, _MAX_EXP)) * np.expm1(np.minimum(a, _MAX_EXP)) / (lam * tau), MAX_OVERHEAD_FACTOR
        )
    factor = np.where(a + b > _MAX_EXP, MAX_OVERHEAD_FACTOR, factor)
    return np.where(positive, factor, 1.0)


def overhead_slope(rate_per_hour: float, workload: Workload) -> float:
    """``dF/drate`` (hours): extra paid time per useful hour per extra interruption per hour.

    By the envelope theorem the interval's own change does not contribute at the optimum,
    so this is the partial derivative at fixed ``tau``. At rate 0 it is the first-order
    ``tau/2 + delta/2 + R`` evaluated with the interval of a vanishing rate, which grows
    without bound; callers pass a positive reference rate.
    """
    if rate_per_hour <= 0:
        raise ValueError("the slope is taken at a positive rate")
    f = overhead_factor(rate_per_hour, workload)
    tau = checkpoint_interval(rate_per_hour, workload) or 0.0
    lam = rate_per_hour
    a_hours = (tau + workload.checkpoint_write_seconds) / 3600
    x = lam * a_hours
    # d/dlam ln(e^{lam R} (e^{lam a} - 1) / (lam tau)) = R + a e^{x}/(e^{x}-1) - 1/lam
    tail = a_hours / 2 + lam * a_hours * a_hours / 12 if x < 1e-6 else a_hours * math.exp(x) / math.expm1(x) - 1 / lam
    return f * (workload.restart_seconds / 3600 + tail)


# ---- per-pool and per-fleet true cost ------------------------------------------------


def node_true_cost_per_hour(price_per_hour: float, rate_per_hour: float, workload: Workload) -> float:
    """Independent nodes: one node's expected true cost per hour, ``price * F(rate)``."""
    return price_per_hour * overhead_factor(rate_per_hour, workload)


def true_cost_shares(nodes: Iterable[tuple[int, float, float]], workload: Workload) -> list[float]:
    """Expected true cost per hour of each ``(count, price, rate)`` group.

    Independent: ``n * p * F(lam)``. Coupled: the fleet pays ``P * F(Lam)`` with
    ``P = sum(n * p)``, ``Lam = sum(n * lam)``; each group pays its price plus the fleet's
    overhead ``P * (F(Lam) - 1)`` in proportion to the interruptions it causes
    (``n * lam / Lam``), so on-demand nodes show their bare price.
    """
    groups = list(nodes)
    if workload.kind is WorkloadKind.COUPLED:
        price = sum(n * p for n, p, _ in groups)
        rate = sum(n * lam for n, _, lam in groups)
        if rate <= 0:
            return [n * p for n, p, _ in groups]
        overhead = price * (overhead_factor(rate, workload) - 1)
        return [n * p + overhead * n * lam / rate for n, p, lam in groups]
    return [n * node_true_cost_per_hour(p, lam, workload) for n, p, lam in groups]


def fleet_true_cost_per_hour(nodes: Iterable[tuple[int, float, float]], workload: Workload) -> float:
    """Expected true cost per hour of a fleet of ``(count, price, rate)`` groups under the
    workload model: independent ``sum(n * p * F(lam))``, coupled ``P * F(sum(n * lam))``."""
    return sum(true_cost_shares(nodes, workload))


@dataclass(frozen=True)
class CoupledTangent:
    """Linear node cost ``price_coef * p + rate_coef * lam`` around a reference fleet."""

    price_coef: float
    rate_coef: float

    def node_cost(self, price_per_hour: float, rate_per_hour: float) -> float:
        return self.price_coef * price_per_hour + self.rate_coef * rate_per_hour


def coupled_tangent(fleet_price: float, fleet_rate: float, workload: Workload) -> CoupledTangent:
    """Tangent plane of ``P * F(Lam)`` at ``(fleet_price, fleet_rate)``; ``fleet_rate > 0``."""
    return CoupledTangent(
        price_coef=overhead_factor(fleet_rate, workload), rate_coef=fleet_price * overhead_slope(fleet_rate, workload)
    )
