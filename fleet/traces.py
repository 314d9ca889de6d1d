"""Spot availability traces shipped with the package (``fleet/data/traces``).

A trace is a sequence of ticks, each ``gap_seconds`` long: ``True`` where spot capacity
was available. Pure loading and statistics; no clock, no randomness.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class Trace:
    name: str  # "h100/us-central1-a"
    gap_seconds: int
    available: tuple[bool, ...]
    spot_price: float | None = None  # whole a3-highgpu-8g, USD/h, where recorded
    on_demand_price: float | None = None

    @property
    def hours(self) -> float:
        return len(self.available) * self.gap_seconds / 3600

    @property
    def availability(self) -> float:
        return sum(self.available) / len(self.available)

    @property
    def preemptions_per_hour(self) -> float:
        """Available->unavailable transitions per hour of availability."""
        up = sum(self.available)
        if not up:
            return 0.0
        drops = sum(1 for a, b in zip(self.available, self.available[1:]) if a and not b)
        return drops / (up * self.gap_seconds / 3600)

    def available_at(self, seconds: float) -> bool:
        """Availability at ``seconds`` from the trace start; the trace repeats."""
        return self.available[int(seconds // self.gap_seconds) % len(self.available)]

    def next_unavailable(self, seconds: float) -> float | None:
        """Seconds from trace start (>= ``seconds``) of the next unavailable tick, None if never."""
        n = len(self.available)
        start = int(seconds // self.gap_seconds)
        for k in range(n):
            if not self.available[(start + k) % n]:
                return max(seconds, (start + k) * self.gap_seconds)
        return None


def _load(family: str, name: str) -> Trace:
    raw = json.loads(resources.files("fleet.data").joinpath(f"traces/{family}/{name}.json").read_text())
    meta = raw["metadata"]
    price = meta.get("price_info") or {}
    return Trace(
        name=f"{family}/{name}",
        gap_seconds=int(meta["gap_seconds"]),
        available=tuple(v == 0 for v in raw["data"]),
        spot_price=price.get("price"),
        on_demand_price=price.get("on_demand_price"),
    )


@lru_cache(maxsize=1)
def all_traces() -> tuple[Trace, ...]:
    """Every shipped trace, sorted by name (deterministic order)."""
    root = resources.files("fleet.data").joinpath("traces")
    out = []
    for family in ("h100", "v100"):
        for entry in sorted(root.joinpath(family).iterdir(), key=lambda p: p.name):
            if entry.name.endswith(".json"):
                out.append(_load(family, entry.name.removesuffix(".json")))
    return tuple(out)


def trace_for_zone(zone: str) -> Trace | None:
    """The GCP H100 trace recorded in ``zone``, if one was."""
    for t in all_traces():
        if t.name == f"h100/{zone}":
            return t
    return None
