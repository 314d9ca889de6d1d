"""Interruption rates of freshly launched nodes, fitted from a trace's run lengths (pure).

A trace's drops per available hour (``fleet.traces.Trace.preemptions_per_hour``, the
catalog's estimate) overstate what a newly launched node sees: the traces are bursty (long
quiet runs, short flapping ones), and a launch at a random available moment more likely lands
in a long run. :func:`fresh_node_rate` launches a node at every available tick in turn: its
life is the rest of its run (a run that reaches the trace's end is censored: never lost), and
the rate is the nodes lost within ``horizon_hours`` of launch over the hours they ran within
it, so time since launch matters.
"""

from __future__ import annotations

from collections.abc import Sequence


def run_lengths(available: Sequence[bool]) -> list[tuple[int, bool]]:
    """(ticks, ends in a drop) of every maximal run of available ticks, in order."""
    out: list[tuple[int, bool]] = []
    n = 0
    for a in available:
        if a:
            n += 1
        elif n:
            out.append((n, True))
            n = 0
    if n:
        out.append((n, False))
    return out


def fresh_node_rate(available: Sequence[bool], gap_seconds: float, horizon_hours: float = 24.0) -> float:
    """Interruptions per instance-hour of a node launched at a random available tick, over its
    first ``horizon_hours`` (see the module doc); 0 when the trace is never available."""
    h = max(1, int(horizon_hours * 3600 // gap_seconds))
    lost = 0
    exposure_ticks = 0
    for length, dropped in run_lengths(available):
        # launches at each tick of the run: remaining lives 1..length ticks
        short = min(length, h)
        exposure_ticks += short * (short + 1) // 2 + (length - short) * h
        if dropped:
            lost += short
    if not exposure_ticks:
        return 0.0
    return lost / (exposure_ticks * gap_seconds / 3600)
