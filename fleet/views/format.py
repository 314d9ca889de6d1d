"""Small formatters every face uses alike (the CLI's tables, the dashboard's pages): money,
durations, a pool without its market."""

from __future__ import annotations


def money(value: float | None, per_hour: bool = False) -> str:
    if value is None:
        return "-"
    return f"${value:,.2f}{'/h' if per_hour else ''}"


def duration(seconds: float) -> str:
    """``42s``, ``7m05s``, ``3h12m``, ``2d04h``."""
    s = int(max(0.0, seconds))
    for unit, size, sub, subsize in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= size:
            return f"{s // size}{unit}{(s % size) // subsize:02d}{sub}"
    return f"{s}s"


def short_pool(pool_id: str) -> str:
    """``aws/us-east-1/use1-az4/p5.48xlarge/spot`` without the market (shown in its own column)."""
    return pool_id.rsplit("/", 1)[0].replace("/-/", "/")
