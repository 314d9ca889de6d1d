"""Inline SVG line charts drawn server-side (no JavaScript, no library).

``line_chart`` takes series of ``(x, y)`` points and returns one ``<svg>`` element; every
label it writes is escaped, so callers may pass provider text as a series name."""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime, timezone

#: Stroke colours of the series, in order.
COLOURS = ("#2563eb", "#f59e0b", "#16a34a", "#dc2626")


def line_chart(
    title: str,
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    *,
    width: int = 560,
    height: int = 180,
    unit: str = "",
) -> str:
    """A step-free line chart of ``series`` (name, points) sharing one x axis (epoch seconds,
    labelled in UTC) and one y axis from 0; an empty chart says there is no data yet."""
    esc = html.escape
    pad_l, pad_r, pad_t, pad_b = 56, 12, 24, 28
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    points = [p for _, pts in series for p in pts]
    head = (
        f'<svg class="chart" role="img" aria-label="{esc(title)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
        f'<text x="{pad_l}" y="15" class="chart-title">{esc(title)}</text>'
    )
    if not points:
        return head + f'<text x="{pad_l}" y="{pad_t + h / 2:.0f}">no data yet</text></svg>'
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    y1 = max(max(p[1] for p in points), 1e-9)
    span = (x1 - x0) or 1.0

    def sx(x: float) -> float:
        return pad_l + (x - x0) / span * w

    def sy(y: float) -> float:
        return pad_t + h - y / y1 * h

    parts = [
        head,
        f'<line x1="{pad_l}" y1="{pad_t + h}" x2="{pad_l + w}" y2="{pad_t + h}" stroke="#999"/>',
        f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + h}" stroke="#999"/>',
        f'<text x="{pad_l - 4}" y="{pad_t + 4}" text-anchor="end">{esc(_num(y1, unit))}</text>',
        f'<text x="{pad_l - 4}" y="{pad_t + h}" text-anchor="end">0</text>',
        f'<text x="{pad_l}" y="{height - 8}">{_time(x0)}</text>',
        f'<text x="{pad_l + w}" y="{height - 8}" text-anchor="end">{_time(x1)}</text>',
    ]
    for k, (name, pts) in enumerate(series):
        colour = COLOURS[k % len(COLOURS)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="6 4"' if k else ""  # a later series stays visible where they overlap
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{path}"/>')
        parts.append(f'<text x="{pad_l + 8 + 130 * k}" y="{pad_t + 12}" fill="{colour}">{esc(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _num(value: float, unit: str) -> str:
    text = f"{value:,.2f}" if unit == "$" else f"{value:,.0f}"
    return f"${text}" if unit == "$" else text


def _time(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%m-%d %H:%M")
