"""Cost accrual: hand-built instance records with known answers."""

from __future__ import annotations

import pytest

from fleet.provisioning.accounting import by_pool, hours_run, summarize
from fleet.state.records import InstanceRecord

SPOT = "aws/us-east-1/use1-az1/p5.48xlarge/spot"
OD = "gcp/us-central1/us-central1-a/a3-highgpu-8g/on-demand"


def rec(
    iid: str,
    pool: str,
    price: float,
    start: float,
    end: float | None = None,
    *,
    od: float | None = None,
    reason: str = "",
    gpus: int = 8,
) -> InstanceRecord:
    market = pool.rsplit("/", 1)[1]
    return InstanceRecord(
        fleet="f",
        id=iid,
        pool=pool,
        market=market,
        accelerator="H100",
        gpus=gpus,
        price_per_hour=price,
        launched_at=start,
        on_demand_price=od,
        ended_at=end,
        end_reason=reason,
    )


def test_cost_rate_and_savings():
    records = [
        rec("a", SPOT, 30.0, 0, 7200, od=90.0, reason="preempted"),  # 2 h spot: 60, od-equiv 180
        rec("b", SPOT, 30.0, 3600, od=90.0),  # alive 1 h at now=7200: 30, od-equiv 90
        rec("c", OD, 100.0, 0),  # alive 2 h on-demand: 200
    ]
    s = summarize(records, 7200.0)
    assert s.cost_so_far == pytest.approx(290.0)
    assert (s.spot_cost, s.on_demand_cost) == (pytest.approx(90.0), pytest.approx(200.0))
    assert s.rate_per_hour == pytest.approx(130.0)
    assert (s.spot_rate_per_hour, s.on_demand_rate_per_hour) == (30.0, 100.0)
    assert (s.running, s.running_gpus, s.interruptions) == (2, 16, 1)
    assert s.instance_hours == pytest.approx(5.0) and s.gpu_hours == pytest.approx(40.0)
    assert s.on_demand_equivalent == pytest.approx(470.0)
    assert s.savings == pytest.approx(180.0)
    assert s.savings_fraction == pytest.approx(180.0 / 470.0)
    assert s.covered_fraction == pytest.approx(1.0)


def test_unknown_on_demand_price_is_left_out_of_savings():
    records = [rec("a", SPOT, 10.0, 0, od=None), rec("b", SPOT, 30.0, 0, od=60.0)]
    s = summarize(records, 3600.0)
    assert s.savings == pytest.approx(30.0)
    assert s.covered_fraction == pytest.approx(0.75)
    none = summarize([rec("a", SPOT, 10.0, 0)], 3600.0)
    assert none.savings is None and none.savings_fraction is None and none.on_demand_equivalent is None


def test_per_provider_clocks_and_non_negative_hours():
    records = [rec("a", SPOT, 36.0, 1000), rec("b", OD, 36.0, 5000)]
    s = summarize(records, {"aws": 1000 + 3600, "gcp": 4000})  # gcp clock behind its launch: 0 h
    assert s.cost_so_far == pytest.approx(36.0)
    assert summarize(
        records, lambda provider: 1000 + 3600 if provider == "aws" else 5000 + 1800
    ).cost_so_far == pytest.approx(54.0)
    assert hours_run(rec("x", SPOT, 1, 100, 50), 0) == 0.0


def test_empty_fleet_and_per_pool_split():
    empty = summarize([], 0.0)
    assert (empty.cost_so_far, empty.rate_per_hour, empty.running, empty.savings) == (0.0, 0.0, 0, None)
    pools = by_pool([rec("a", SPOT, 10.0, 0), rec("b", SPOT, 10.0, 0), rec("c", OD, 5.0, 0)], 3600.0)
    assert list(pools) == [SPOT, OD]
    assert pools[SPOT].cost_so_far == pytest.approx(20.0) and pools[OD].running == 1
