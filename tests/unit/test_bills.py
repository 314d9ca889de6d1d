"""The bill rule (``fleet.rebalance.bills``): which alive instances bill beyond the budget, and the
budget as read from a recorded spec's JSON agreeing with the spec's own model."""

from __future__ import annotations

import json

import pytest

from fleet.rebalance.bills import Limits, breaches
from fleet.spec import FleetSpec
from fleet.state.records import InstanceRecord

BASE = {"name": "bills", "capacity": {"gpus": 8, "accelerators": ["H100"]}}


def _rec(
    iid: str,
    planned: float,
    billed: float | None,
    *,
    market: str = "spot",
    rental: str = "spot",
    ended: float | None = None,
) -> InstanceRecord:
    return InstanceRecord(
        fleet="f",
        id=iid,
        pool=f"vast/us/-/1x-m{iid}/{market}",
        market=market,
        accelerator="H100",
        gpus=1,
        price_per_hour=planned,
        launched_at=0.0,
        ended_at=ended,
        billed_per_hour=billed,
        billed_source="instance",
        rental=rental,
    )


@pytest.mark.parametrize("budget", [{}, {"cap_action": "destroy", "bill_tolerance": 0.25, "max_per_node": 3.5}])
def test_limits_read_from_a_recorded_spec_are_the_specs_own(budget):
    spec = FleetSpec.model_validate({**BASE, "budget": budget})
    recorded = json.loads(spec.model_dump_json())
    assert Limits.of(recorded) == Limits(spec.budget.cap_action, spec.budget.bill_tolerance, spec.budget.max_per_node)
    assert (
        Limits.of(None)
        == Limits.of({})
        == Limits.of({"budget": {"cap_action": 7}})
        == Limits.of(FleetSpec.model_validate(BASE).model_dump(mode="json"))
    )


def test_one_breach_per_instance_the_first_rule_that_holds():
    records = [
        _rec("1", 1.0, 1.10),
        _rec("2", 1.0, 1.11),
        _rec("3", 1.0, 2.0, rental="on-demand"),
        _rec("4", 4.0, 4.0),
        _rec("5", 1.0, None),
        _rec("6", 1.0, 9.0, ended=5.0),
        _rec("7", 2.0, 2.5, market="on-demand", rental="on-demand"),
    ]
    found = {b.instance_id: b.why for b in breaches(records, Limits(tolerance=0.10, max_per_node=3.0))}
    assert found == {"2": "over-plan", "3": "rental-mismatch", "4": "over-cap", "7": "over-plan"}
    assert [(b.instance_id, b.why) for b in breaches(records, Limits(tolerance=10.0))] == [("3", "rental-mismatch")]


def test_cost_so_far_is_at_the_billed_rate_where_read_and_the_planned_price_elsewhere():
    from fleet.views.bills import accrued

    read = _rec("1", planned=2.0, billed=2.5)  # 2 h at 2.5 billed (planned 2.0)
    unread = _rec("2", planned=1.0, billed=None)  # 2 h at 1.0 planned
    ended = _rec("3", planned=4.0, billed=3.0, ended=3600.0)  # 1 h at 3.0 billed, then ended
    assert accrued([read, unread, ended], 7200.0) == {
        "cost_so_far": pytest.approx(5.0 + 2.0 + 3.0),
        "planned_cost_so_far": pytest.approx(4.0 + 2.0 + 4.0),
        "cost_basis": "mixed",
    }
    assert accrued([read, ended], 7200.0)["cost_basis"] == "billed"
    assert accrued([unread], 7200.0) == {
        "cost_so_far": pytest.approx(2.0),
        "planned_cost_so_far": pytest.approx(2.0),
        "cost_basis": "planned",
    }
    assert accrued([read, unread], 0.0)["cost_basis"] == "planned"  # nothing has run yet: nothing billed
    assert accrued([], {"vast": 10.0})["cost_so_far"] == 0.0
