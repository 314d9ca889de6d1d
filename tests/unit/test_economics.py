"""fleet.planning.economics: the seed-004 arithmetic, Young/Daly, the Poisson waste model, workload models."""

from __future__ import annotations

import math

import pytest

from fleet.planning import economics as ec
from fleet.spec import Workload, WorkloadKind

INDEPENDENT = Workload(kind=WorkloadKind.INDEPENDENT, checkpoint_write_seconds=60, restart_seconds=300)
COUPLED = Workload(kind=WorkloadKind.COUPLED, checkpoint_write_seconds=60, restart_seconds=300)


def test_seed_004_example_holds_exactly():
    result = ec.compare_spot_on_demand(
        compute_hours=1000, spot_price=2.25, on_demand_price=4.50, overhead_fraction=0.10, storage_cost=50
    )
    assert result.spot_cost == pytest.approx(2525.0, abs=1e-9)
    assert result.on_demand_cost == pytest.approx(4500.0, abs=1e-9)
    assert result.savings == pytest.approx(1975.0, abs=1e-9)
    assert round(result.savings_fraction * 100) == 44


def test_higher_preemption_overhead_shrinks_savings():
    at_10 = ec.compare_spot_on_demand(1000, 2.25, 4.50, 0.10, 50).savings_fraction
    at_30 = ec.compare_spot_on_demand(1000, 2.25, 4.50, 0.30, 50).savings_fraction
    assert at_30 < at_10
    assert at_30 == pytest.approx(1 - (2250 * 1.3 + 50) / 4500)


def test_bad_cost_inputs_are_rejected():
    with pytest.raises(ValueError, match="non-negative"):
        ec.expected_true_cost(-1, 2.0)
    with pytest.raises(ValueError, match="positive"):
        ec.savings_fraction(10.0, 0.0)


def test_young_interval_is_sqrt_2_delta_m():
    assert ec.young_interval(60, 3600) == pytest.approx(math.sqrt(2 * 60 * 3600))


def test_daly_matches_young_to_first_order_and_caps_at_m():
    young, daly = ec.young_interval(1, 360_000), ec.daly_interval(1, 360_000)
    assert daly == pytest.approx(young, rel=2e-3)
    # Daly's series: sqrt(2dM) * (1 + sqrt(d/2M)/3 + (d/2M)/9) - d
    d, m = 300.0, 3600.0
    x = d / (2 * m)
    assert ec.daly_interval(d, m) == pytest.approx(math.sqrt(2 * d * m) * (1 + math.sqrt(x) / 3 + x / 9) - d)
    assert ec.daly_interval(8000, 3600) == 3600


def test_interval_arguments_are_checked():
    with pytest.raises(ValueError):
        ec.young_interval(60, 0)
    with pytest.raises(ValueError):
        ec.time_factor(0, 60, 300, 0.1)


@pytest.mark.parametrize("rate", [0.05, 0.3, 2.0])
def test_daly_interval_is_near_the_minimum_of_the_poisson_waste(rate):
    tau = ec.checkpoint_interval(rate, INDEPENDENT)
    at = ec.waste_fraction(tau, 60, 300, rate)
    grid = [ec.waste_fraction(tau * f, 60, 300, rate) for f in (0.25, 0.5, 0.8, 1.25, 2.0, 4.0)]
    assert all(at <= g + 1e-4 for g in grid)


def test_waste_matches_the_first_order_model_for_rare_interruptions():
    rate, tau, delta, restart = 0.01, 600.0, 30.0, 120.0
    first_order = delta / tau + (rate / 3600) * (tau / 2 + restart)
    assert ec.time_factor(tau, delta, restart, rate) - 1 == pytest.approx(first_order, rel=0.02)


def test_no_interruptions_means_no_overhead_and_no_interval():
    assert ec.overhead_factor(0.0, INDEPENDENT) == 1.0
    assert ec.checkpoint_interval(0.0, INDEPENDENT) is None
    assert ec.node_true_cost_per_hour(3.0, 0.0, INDEPENDENT) == 3.0


def test_overhead_grows_with_rate_and_is_capped():
    factors = [ec.overhead_factor(r, INDEPENDENT) for r in (0.01, 0.1, 1.0, 10.0)]
    assert factors == sorted(factors) and factors[0] > 1
    assert ec.overhead_factor(1e6, INDEPENDENT) == ec.MAX_OVERHEAD_FACTOR


@pytest.mark.parametrize("rate", [0.01, 0.3, 3.0])
def test_overhead_slope_matches_a_finite_difference(rate):
    tau = ec.checkpoint_interval(rate, INDEPENDENT)
    h = rate * 1e-5
    numeric = (ec.time_factor(tau, 60, 300, rate + h) - ec.time_factor(tau, 60, 300, rate - h)) / (2 * h)
    assert ec.overhead_slope(rate, INDEPENDENT) == pytest.approx(numeric, rel=1e-4)


def test_coupled_fleet_pays_for_every_nodes_interruptions():
    nodes = [(4, 2.0, 0.2)]  # four nodes at $2/h, each interrupted 0.2 times an hour
    independent = ec.fleet_true_cost_per_hour(nodes, INDEPENDENT)
    coupled = ec.fleet_true_cost_per_hour(nodes, COUPLED)
    assert independent == pytest.approx(4 * 2.0 * ec.overhead_factor(0.2, INDEPENDENT))
    assert coupled == pytest.approx(8.0 * ec.overhead_factor(0.8, COUPLED))
    assert coupled > independent


def test_coupled_shares_add_up_and_on_demand_pays_its_price():
    nodes = [(2, 3.0, 0.0), (3, 1.5, 0.25)]
    shares = ec.true_cost_shares(nodes, COUPLED)
    assert sum(shares) == pytest.approx(ec.fleet_true_cost_per_hour(nodes, COUPLED))
    assert shares[0] == pytest.approx(6.0)


def test_coupled_tangent_is_the_gradient_of_the_fleet_cost():
    price, rate = 40.0, 1.2
    tangent = ec.coupled_tangent(price, rate, COUPLED)

    def cost(p: float, lam: float) -> float:
        return p * ec.overhead_factor(lam, COUPLED)

    h = 1e-4
    d_price = (cost(price + h, rate) - cost(price - h, rate)) / (2 * h)
    assert tangent.price_coef == pytest.approx(d_price, rel=1e-6)
    # the interval is re-optimised inside F, so the total derivative equals the envelope slope
    d_rate = (cost(price, rate + h) - cost(price, rate - h)) / (2 * h)
    assert tangent.rate_coef == pytest.approx(d_rate, rel=1e-2)
    assert tangent.node_cost(2.0, 0.1) == pytest.approx(2.0 * tangent.price_coef + 0.1 * tangent.rate_coef)
