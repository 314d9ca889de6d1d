"""Reading spot availability traces for ``fleet simulate``: one JSON file per zone.

A file is ``{"data": [int per tick], "metadata": {"gap_seconds": N, "zone": "...", ...}}``
(the SkyNomad format of the shipped ``fleet/data/traces``). How a value is read is an
option (``ValueMeaning``): ``zero`` (the default, as the shipped traces: 0 = available,
anything else = unavailable), ``one`` (1 = available) or ``count`` (the value is the number
of instances available). The tick length comes from ``metadata.gap_seconds`` or, where a file
lacks it, from the caller. A trace's name is ``metadata.zone``, else the file's stem.

:func:`parse_trace` is pure; :func:`load_traces` reads a directory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from fleet.errors import FleetError

#: Capacity of an available tick in a 0/1 trace: more than any fleet asks of one pool.
UNLIMITED = 1_000_000


class ValueMeaning(str, Enum):
    ZERO = "zero"  # 0 = available (shipped SkyNomad traces)
    ONE = "one"  # 1 = available
    COUNT = "count"  # the value is the number of instances available


@dataclass(frozen=True)
class ZoneTrace:
    """Instances available per tick in one zone (``UNLIMITED`` for "available" in 0/1 traces)."""

    name: str
    gap_seconds: int
    capacity: tuple[int, ...]

    @property
    def available(self) -> tuple[bool, ...]:
        return tuple(c > 0 for c in self.capacity)


def parse_trace(
    raw: Any, stem: str, meaning: ValueMeaning = ValueMeaning.ZERO, gap_seconds: int | None = None
) -> ZoneTrace:
    """One parsed trace file; ``FleetError`` naming the field when the file is malformed.

    ``gap_seconds`` overrides the file's ``metadata.gap_seconds`` (and is needed without it)."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("data"), list):
        raise FleetError(f"trace {stem}: expected a JSON object with a `data` list of integers")
    meta = raw.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise FleetError(f"trace {stem}: `metadata` must be an object")
    gap = gap_seconds if gap_seconds is not None else meta.get("gap_seconds")
    if gap is None:
        raise FleetError(f"trace {stem}: no metadata.gap_seconds; give the tick length with --tick (e.g. --tick 10m)")
    if not isinstance(gap, (int, float)) or isinstance(gap, bool) or gap <= 0 or int(gap) != gap:
        raise FleetError(f"trace {stem}: gap_seconds must be a positive whole number of seconds, got {gap!r}")
    data = raw["data"]
    if not data:
        raise FleetError(f"trace {stem}: `data` is empty")
    bad = next((v for v in data if not isinstance(v, int) or isinstance(v, bool) or v < 0), None)
    if bad is not None:
        raise FleetError(f"trace {stem}: `data` holds {bad!r}; every value must be a non-negative integer")
    if meaning is ValueMeaning.ZERO:
        capacity = tuple(UNLIMITED if v == 0 else 0 for v in data)
    elif meaning is ValueMeaning.ONE:
        capacity = tuple(UNLIMITED if v == 1 else 0 for v in data)
    else:
        capacity = tuple(int(v) for v in data)
    name = str(meta.get("zone") or stem)
    return ZoneTrace(name=name, gap_seconds=int(gap), capacity=capacity)


def load_traces(
    directory: Path, meaning: ValueMeaning = ValueMeaning.ZERO, gap_seconds: int | None = None
) -> list[ZoneTrace]:
    """Every ``*.json`` trace in ``directory``, sorted by name, cut to the shortest one.

    All traces must share one tick length."""
    if not directory.is_dir():
        raise FleetError(f"--traces {directory}: not a directory of per-zone JSON trace files")
    traces = []
    for path in sorted(directory.glob("*.json")):
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise FleetError(f"trace {path.name}: cannot read it as JSON ({err})") from None
        traces.append(parse_trace(raw, path.stem, meaning, gap_seconds))
    if not traces:
        raise FleetError(f"--traces {directory}: no *.json trace files there")
    gaps = {t.gap_seconds for t in traces}
    if len(gaps) > 1:
        raise FleetError(
            f"--traces {directory}: traces have different tick lengths {sorted(gaps)}; "
            "give one with --tick or split the directory"
        )
    names = [t.name for t in traces]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise FleetError(f"--traces {directory}: two traces are for zone {dup!r}")
    n = min(len(t.capacity) for t in traces)
    return [ZoneTrace(t.name, t.gap_seconds, t.capacity[:n]) for t in traces]


def shipped_trace_dir(family: str = "h100") -> Path:
    """The directory of the traces shipped with the package (``fleet/data/traces/<family>``)."""
    from importlib import resources

    return Path(str(resources.files("fleet.data").joinpath(f"traces/{family}")))
