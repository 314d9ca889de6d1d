"""fleet.cli.lifecycle.FleetView reads the clock once: every figure of one output (cost so far
in the headline and the footer, ages) is taken at the same instant, even when no provider
answered and the local clock stands in."""

from __future__ import annotations

import time

from fleet.cli.lifecycle import FleetView
from fleet.provisioning.reconcile import Observation
from fleet.state import FleetRecord


def view(obs: Observation) -> FleetView:
    record = FleetRecord(
        name="f", status="up", spec_json=None, spec_hash="", backend="local", created_at=0.0, updated_at=0.0
    )
    return FleetView(record=record, providers={}, obs=obs, synced=False, result=None, plan=None)


def test_without_a_provider_clock_every_read_gives_the_instant_of_the_look():
    before = time.time()
    v = view(Observation(fleet="f"))
    first = v.clock("aws")
    time.sleep(0.01)
    assert v.clock("gcp") == v.clock("aws") == first and first >= before


def test_a_provider_clock_is_what_that_provider_said():
    v = view(Observation(fleet="f", now={"local": 1000.0}))
    assert v.clock("local") == 1000.0 and v.clock("aws") == 1000.0
