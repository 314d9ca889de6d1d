"""The replayed market: which catalog pools a trace drives, and their capacity per tick (pure).

Mapping rule (documented in docs/simulate.md): a spot pool follows the trace named after its zone
(its region where the provider has no zones). A mapping (``--mapping FILE``: trace name ->
list of pool-id prefixes) replaces the rule for the traces it names. Spot pools without a
trace are left out of the simulation (nothing is known of their availability) and reported;
on-demand pools are always available.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleet.model import Market, Offer
from fleet.simulate.tracefile import ZoneTrace


@dataclass(frozen=True)
class Replay:
    """Offers to simulate with and the spot capacity per tick of each spot pool.

    ``capacity[pool_id][t]``: instances the pool can hold during tick ``t``; a pool missing
    from it (on-demand) is never short. ``unmapped``: spot pools left out for want of a trace;
    ``unused``: traces no pool follows."""

    tick_seconds: int
    ticks: int
    offers: tuple[Offer, ...]
    capacity: Mapping[str, tuple[int, ...]]
    trace_of: Mapping[str, str]
    unmapped: tuple[str, ...] = ()
    unused: tuple[str, ...] = ()

    def cap(self, pool: str, tick: int) -> int | None:
        """Capacity of ``pool`` at ``tick``, ``None`` for unlimited (on-demand)."""
        series = self.capacity.get(pool)
        return None if series is None else series[tick]


def build_replay(
    offers: Sequence[Offer],
    traces: Sequence[ZoneTrace],
    ticks: int | None = None,
    mapping: Mapping[str, Sequence[str]] | None = None,
) -> Replay:
    """Map ``offers``' spot pools to ``traces`` (see the module doc); ``ticks`` cuts the replay."""
    if not traces:
        raise ValueError("no traces")
    by_name = {t.name: t for t in traces}
    n = min(len(t.capacity) for t in traces)
    if ticks is not None:
        n = min(n, ticks)
    mapping = dict(mapping or {})
    trace_of: dict[str, str] = {}
    unmapped: list[str] = []
    kept: list[Offer] = []
    for o in sorted(offers, key=lambda o: o.pool.id):
        if o.market is Market.ON_DEMAND:
            kept.append(o)
            continue
        name = _trace_for(o, mapping, by_name)
        if name is None:
            unmapped.append(o.pool.id)
            continue
        trace_of[o.pool.id] = name
        kept.append(o)
    capacity = {pool: by_name[name].capacity[:n] for pool, name in trace_of.items()}
    used = set(trace_of.values())
    return Replay(
        tick_seconds=traces[0].gap_seconds,
        ticks=n,
        offers=tuple(kept),
        capacity=capacity,
        trace_of=trace_of,
        unmapped=tuple(unmapped),
        unused=tuple(sorted(t.name for t in traces if t.name not in used)),
    )


def _trace_for(offer: Offer, mapping: Mapping[str, Sequence[str]], by_name: Mapping[str, ZoneTrace]) -> str | None:
    pool = offer.pool.id
    for name, prefixes in sorted(mapping.items()):
        if name in by_name and any(pool.startswith(p) for p in prefixes):
            return name
    if any(any(pool.startswith(p) for p in prefixes) for prefixes in mapping.values()):
        return None
    key = offer.pool.zone or offer.pool.region
    return key if key in by_name else None
