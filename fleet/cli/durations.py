"""Durations as options give them (``--every 5m``, ``fleet local advance 1h30m``, ``--cold-start
90s``): one reader for every command."""

from __future__ import annotations

import re

from fleet.errors import FleetError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd])")


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``90s``, ``15m``, ``2h``, ``1d``, ``1h30m`` (a bare number only alone);
    FleetError otherwise."""
    compact = text.strip().lower()
    if _NUMBER.fullmatch(compact):
        return float(compact)
    total, pos = 0.0, 0
    for m in _PART.finditer(compact):
        if m.start() != pos:
            break
        total, pos = total + float(m.group(1)) * _UNITS[m.group(2)], m.end()
    if not compact or pos != len(compact):
        raise FleetError(f"cannot read duration {text!r}; use seconds or units s/m/h/d, e.g. 90s, 15m, 2h, 1h30m")
    return total
