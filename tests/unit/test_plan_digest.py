"""``PlanDigest``: what ``fleet status`` and ``fleet history`` read of a stored plan, as plain data.

It must say what the full ``Plan`` says (id, instances per pool, price per hour, on-demand price
per pool) for a plan the planner made, and refuse a damaged body as ``fleet repair``'s damage,
as reading the full plan does.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from fleet.catalog import snapshot_offers_of
from fleet.model import PlanDigest
from fleet.planning.planner import plan as make_plan
from fleet.provisioning.reconcile import on_demand_prices
from fleet.spec import parse_spec
from fleet.state import open_store
from fleet.state.rows import DamagedRowError

SPEC = """
name: digest
capacity:
  gpus: 32
  accelerators: [H100]
  on_demand_gpus: 8
diversification:
  min_pools: 3
"""


@pytest.fixture
def planned():
    spec = parse_spec(SPEC)
    return make_plan(spec, list(snapshot_offers_of({"H100"})))


def test_the_digest_says_what_the_plan_says(planned, tmp_path):
    assert {a.offer.market.value for a in planned.allocations if a.count} == {"spot", "on-demand"}
    store = open_store(str(tmp_path / "state.db"))
    try:
        store.save_plan(planned)
        digest = store.latest_plan_digest("digest")
        assert store.latest_plan_digest("digest", applied_only=True) is None
        store.mark_plan_applied("digest", planned.id)
        assert store.latest_plan_digest("digest", applied_only=True) == digest
    finally:
        store.close()
    assert digest == PlanDigest.from_json(planned.to_json())
    assert digest.id == planned.id
    assert digest.counts() == planned.counts()
    assert digest.price_per_hour == planned.totals.price_per_hour
    assert digest.on_demand == on_demand_prices([planned])


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: "{not json",
        lambda d: json.dumps([d]),
        lambda d: json.dumps({**d, "allocations": "none"}),
        lambda d: json.dumps({**d, "totals": {**d["totals"], "price_per_hour": "cheap"}}),
        lambda d: json.dumps({**d, "allocations": [{**d["allocations"][0], "count": "two"}]}),
        lambda d: json.dumps({**d, "allocations": [{**d["allocations"][0], "count": -1}]}),
        lambda d: json.dumps(
            {**d, "allocations": [{**d["allocations"][0], "offer": {**d["allocations"][0]["offer"], "pool": "aws/x"}}]}
        ),
        lambda d: json.dumps({key: value for key, value in d.items() if key != "spec_hash"}),
    ],
)
def test_a_damaged_body_is_a_damaged_row(planned, tmp_path, damage):
    store = open_store(str(tmp_path / "state.db"))
    try:
        store.save_plan(planned)
        body = damage(json.loads(planned.to_json()))
    finally:
        store.close()
    with sqlite3.connect(tmp_path / "state.db") as conn:  # a torn or hand-edited row
        conn.execute("UPDATE plans SET body = ? WHERE fleet = ?", (body, "digest"))
    store = open_store(str(tmp_path / "state.db"))
    try:
        with pytest.raises(DamagedRowError, match="fleet repair digest"):
            store.latest_plan_digest("digest")
        with pytest.raises(DamagedRowError, match="fleet repair digest"):
            store.latest_plan("digest")
    finally:
        store.close()
