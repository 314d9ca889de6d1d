"""The bound the coupled walk relies on (fleet.planning.coupled.cut_row): every plan with
``Lam <= hi`` worth less than the best so far meets the row ``P + s * Lam < c``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.planning import economics
from fleet.planning.coupled import cut_row
from fleet.spec import Workload, WorkloadKind


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    write=st.floats(0, 1800),
    restart=st.floats(0, 3600),
    hi=st.floats(1e-4, 20.0),
    beat=st.floats(1.0, 1e4),
    fraction=st.one_of(st.just(0.0), st.floats(1e-9, 1.0)),
    margin=st.floats(1e-6, 0.5),
    band=st.one_of(st.just(0.0), st.floats(0.0, 0.99)),
)
def test_every_plan_worth_less_than_the_best_meets_the_cut(write, restart, hi, beat, fraction, margin, band):
    """Over ``[0, hi]`` (the walk) and over a band ``[lo, hi]`` (the screen)."""
    workload = Workload(kind=WorkloadKind.COUPLED, checkpoint_write_seconds=write, restart_seconds=restart)

    def factor(rate: float) -> float:
        return economics.overhead_factor(rate, workload)

    lo = band * hi
    slope, bound = cut_row(hi, beat, factor, lo=lo)
    assert slope >= 0
    rate = lo + fraction * (hi - lo)
    price = beat / factor(rate) * (1 - margin)  # the dearest price still worth less than beat
    assert price + slope * rate < bound


def test_the_cut_excludes_plans_near_the_rate_bound_that_cannot_win():
    """It is not empty: at ``Lam = hi`` a plan priced at ``beat`` (worth more) breaks it."""
    workload = Workload(kind=WorkloadKind.COUPLED, checkpoint_write_seconds=60, restart_seconds=300)
    hi, beat = 0.8, 100.0
    slope, bound = cut_row(hi, beat, lambda r: economics.overhead_factor(r, workload))
    assert slope > 0
    assert beat + slope * hi > bound
    assert np.isfinite(bound)
