"""Synthetic multi-zone spot traces, fitted to recorded ones (pure; seeded).

A policy tuned on the trace it is scored on is scored on its own memory. :func:`fit` reads
recorded per-zone traces into a :class:`TraceModel`; :func:`generate` draws new traces of
any length from it with a seed, so knobs are chosen on some seeds and reported on others.

The model, per zone: an alternating renewal process whose available and unavailable run
lengths are drawn from the zone's recorded ones (a bootstrap: bursty zones stay bursty, a
zone that never dropped never drops), starting available with the recorded share of time.
Co-failures: the recorded ticks where two or more zones dropped together are kept as
"shocks" (the set of zones hit); each tick a shock happens with the recorded rate, one of
them is drawn, and every zone it names that is available goes down for one of its own
unavailable run lengths. The zones' own drops are thinned by the share of their drops that
were part of a shock, so a zone's drop rate stays near the recorded one. Capacity: a 0/1
model (``UNLIMITED`` when available) unless ``counts=(lo, hi)`` asks for instance counts,
then an available tick holds a count that moves by at most one per tick within ``lo..hi``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from fleet.simulate.hazard import run_lengths
from fleet.simulate.tracefile import UNLIMITED, ZoneTrace


@dataclass(frozen=True)
class ZoneModel:
    name: str
    up_runs: tuple[int, ...]  # recorded available run lengths (ticks)
    down_runs: tuple[int, ...]  # recorded unavailable run lengths (ticks)
    start_up: float  # share of ticks available
    own_drop_share: float  # share of this zone's drops that were not part of a shock


@dataclass(frozen=True)
class TraceModel:
    gap_seconds: int
    zones: tuple[ZoneModel, ...]
    shocks: tuple[tuple[str, ...], ...]  # zones that dropped together, one entry per recorded tick
    shock_rate: float  # shocks per tick


def _down_runs(available: Sequence[bool]) -> list[int]:
    return [n for n, _ in run_lengths([not a for a in available])]


def fit(traces: Sequence[ZoneTrace]) -> TraceModel:
    """The model of ``traces`` (same tick length, as ``load_traces`` gives them)."""
    if not traces:
        raise ValueError("no traces to fit")
    ticks = min(len(t.capacity) for t in traces)
    avail = {t.name: t.available[:ticks] for t in traces}
    drops = {z: {k for k in range(1, ticks) if a[k - 1] and not a[k]} for z, a in avail.items()}
    shocks = []
    for k in range(1, ticks):
        hit = tuple(sorted(z for z in avail if k in drops[z]))
        if len(hit) >= 2:
            shocks.append(hit)
    zones = []
    for t in traces:
        a = avail[t.name]
        mine = drops[t.name]
        in_shock = sum(1 for s in shocks if t.name in s)
        zones.append(
            ZoneModel(
                name=t.name,
                up_runs=tuple(n for n, _ in run_lengths(a)),
                down_runs=tuple(_down_runs(a)),
                start_up=sum(a) / len(a),
                own_drop_share=1.0 - in_shock / len(mine) if mine else 1.0,
            )
        )
    return TraceModel(
        gap_seconds=traces[0].gap_seconds,
        zones=tuple(zones),
        shocks=tuple(shocks),
        shock_rate=len(shocks) / max(1, ticks - 1),
    )


def generate(model: TraceModel, ticks: int, seed: int, counts: tuple[int, int] | None = None) -> list[ZoneTrace]:
    """``ticks`` ticks of every zone of ``model``, drawn with ``seed`` (see the module doc)."""
    rng = random.Random(seed)
    up: dict[str, list[bool]] = {}
    for z in model.zones:
        up[z.name] = _renewal(z, ticks, rng)
    for k in range(1, ticks):
        if not model.shocks or rng.random() >= model.shock_rate:
            continue
        for name in rng.choice(model.shocks):
            series = up.get(name)
            zone = next(z for z in model.zones if z.name == name)
            if series is None or not series[k - 1] or not zone.down_runs:
                continue
            for j in range(k, min(ticks, k + rng.choice(zone.down_runs))):
                series[j] = False
    out = []
    for z in model.zones:
        out.append(ZoneTrace(z.name, model.gap_seconds, _capacity(up[z.name], counts, rng)))
    return out


def _renewal(zone: ZoneModel, ticks: int, rng: random.Random) -> list[bool]:
    """Alternating available / unavailable runs drawn from the zone's recorded ones; an
    available run ends in an own drop with probability ``own_drop_share`` (else it goes on)."""
    if not zone.down_runs:
        return [True] * ticks
    if not zone.up_runs:
        return [False] * ticks
    state = rng.random() < zone.start_up
    out: list[bool] = []
    while len(out) < ticks:
        if state:
            n = rng.choice(zone.up_runs)
            while rng.random() >= zone.own_drop_share and len(out) + n < ticks:
                n += rng.choice(zone.up_runs)
        else:
            n = rng.choice(zone.down_runs)
        out += [state] * n
        state = not state
    return out[:ticks]


def _capacity(up: Sequence[bool], counts: tuple[int, int] | None, rng: random.Random) -> tuple[int, ...]:
    if counts is None:
        return tuple(UNLIMITED if a else 0 for a in up)
    lo, hi = counts
    if not 0 < lo <= hi:
        raise ValueError(f"counts {counts}: need 0 < lo <= hi")
    level = rng.randint(lo, hi)
    out = []
    for a in up:
        level = min(hi, max(lo, level + rng.choice((-1, 0, 1))))
        out.append(level if a else 0)
    return tuple(out)
