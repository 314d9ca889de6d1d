"""What changed between consecutive applied plans (``fleet.views.plans``), read back from a real
store (both backends) with plans the planner made over the shipped catalog."""

from __future__ import annotations

from fleet.catalog import snapshot_offers
from fleet.planning.planner import plan
from fleet.spec import FleetSpec
from fleet.state import open_store
from fleet.views.plans import diffs


def _spec(gpus: int) -> FleetSpec:
    return FleetSpec.model_validate(
        {"name": "pd", "capacity": {"gpus": gpus, "accelerators": ["H100"], "gpus_per_node": {"min": 8, "max": 8}}}
    )


def test_consecutive_applied_plans_give_the_pools_that_changed_newest_first(state_url):
    offers = snapshot_offers()
    small, large = plan(_spec(16), offers), plan(_spec(48), offers)
    store = open_store(state_url)
    try:
        assert diffs(store.applied_plans("pd")) == []
        for p in (small, large, large, small):  # a rerun of the same plan changes nothing
            store.save_plan(p)
            store.mark_plan_applied("pd", p.id)
        applied = store.applied_plans("pd")
        assert [p.id for p, _ in applied] == [large.id, small.id]  # each plan once, by when last applied
        (back,) = diffs(applied)
        assert (back["from"], back["to"]) == (large.id, small.id)
        before, after = large.counts(), small.counts()
        assert {c["pool"]: (c["before"], c["after"]) for c in back["changes"]} == {
            p: (before.get(p, 0), after.get(p, 0))
            for p in set(before) | set(after)
            if before.get(p, 0) != after.get(p, 0)
        }
        assert (back["price_before"], back["price_after"]) == (large.totals.price_per_hour, small.totals.price_per_hour)
        assert back["weighted_before"] > back["weighted_after"]
        assert len(store.applied_plans("pd", limit=1)) == 1
    finally:
        store.close()
