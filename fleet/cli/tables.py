"""Tables designed for an 80-column terminal, in the style of ``kubectl get``.

Contract of ``print_table``:

- no borders, two spaces between columns, short headers;
- a cell is never broken inside a word and never cut: when the table is wider than the
  terminal, optional columns are dropped (highest ``drop`` first) and a dim line says that
  ``--wide`` shows them; if it is still too wide, lines run past the edge rather than break;
- one column may be ``flex`` (free text such as event details): it wraps between words.

``compact_pool`` gives the pool id tables show: the market has its own column and a zone
that already names its region (GCP ``us-east4-c``, AWS zone ids ``use1-az4``, RunPod
``CA-MTL-1``) stands for both, so ``gcp/us-east4/us-east4-c/a3-highgpu-1g/spot`` reads
``gcp/us-east4-c/a3-highgpu-1g``. ``--wide`` shows the full id that commands accept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console

#: Narrowest a flex column is squeezed to before optional columns are dropped.
FLEX_MIN = 24
GAP = 2


@dataclass(frozen=True)
class Column:
    header: str
    right: bool = False
    drop: int = 0  # 0: always shown; otherwise dropped (highest first) when the table is too wide
    wide: bool = False  # shown only with --wide
    flex: bool = False  # free text that may wrap between words


def wide_option(f: Any) -> Any:
    return click.option(
        "--wide", "-W", is_flag=True, help="Show every column and full pool ids (for terminals wider than 80)."
    )(f)


def compact_pool(pool_id: str) -> str:
    """``provider/region/zone/instance_type/market`` as ``provider/zone/instance_type`` where the
    zone names its region, else ``provider/region[/zone]/instance_type``; ids of another shape
    are returned as they are."""
    parts = pool_id.split("/")
    if len(parts) != 5:
        return pool_id
    provider, region, zone, instance_type, _market = parts
    if zone in ("", "-"):
        return f"{provider}/{region}/{instance_type}"
    if zone.startswith(region) or provider == "aws":  # AWS zone ids (use1-az4) name the region
        return f"{provider}/{zone}/{instance_type}"
    return f"{provider}/{region}/{zone}/{instance_type}"


def pool_label(pool_id: str, wide: bool) -> str:
    """What a table shows for a pool: its full id with ``--wide``, the compact one otherwise."""
    return pool_id if wide else compact_pool(pool_id)


def _cell_width(cell: str) -> int:
    from rich.text import Text

    return Text.from_markup(cell, emoji=False).cell_len  # as the consoles print it (fleet.cli.app)


def layout(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int, wide: bool
) -> tuple[list[int], list[str]]:
    """Indexes of the columns to show at ``width``, and the headers of those dropped for lack of room."""
    shown = [i for i, c in enumerate(columns) if wide or not c.wide]
    need = {i: max([_cell_width(columns[i].header)] + [_cell_width(r[i]) for r in rows]) for i in shown}

    def total(idx: list[int]) -> int:
        return sum(min(need[i], FLEX_MIN) if columns[i].flex else need[i] for i in idx) + GAP * (len(idx) - 1)

    dropped: list[str] = []
    if not wide:
        while total(shown) > width:
            optional = [i for i in shown if columns[i].drop]
            if not optional:
                break
            victim = max(optional, key=lambda i: (columns[i].drop, i))
            shown.remove(victim)
            dropped.append(columns[victim].header)
    return shown, dropped


def print_table(
    console: Console,
    title: str | None,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    wide: bool = False,
    styles: Sequence[str | None] | None = None,
) -> None:
    """Print ``rows`` under ``title`` on ``console`` following the module's contract."""
    from rich.table import Table

    shown, dropped = layout(columns, rows, console.width, wide)
    table = Table(
        box=None, show_edge=False, pad_edge=False, padding=(0, GAP // 2), header_style="bold", collapse_padding=False
    )
    for i in shown:
        c = columns[i]
        table.add_column(
            c.header,
            justify="right" if c.right else "left",
            no_wrap=not c.flex,
            overflow="fold" if c.flex else "ellipsis",
        )
    for n, row in enumerate(rows):
        table.add_row(*(row[i] for i in shown), style=styles[n] if styles else None)
    if title:
        console.print(f"[bold]{title}[/]")
    need = (
        sum(
            max([_cell_width(columns[i].header)] + [_cell_width(r[i]) for r in rows])
            for i in shown
            if not columns[i].flex
        )
        + GAP * (len(shown) - 1)
        + sum(FLEX_MIN for i in shown if columns[i].flex)
    )
    if need <= console.width:
        console.print(table)
    else:  # lines run past the edge rather than break a word
        saved = console.width
        console.width = need
        try:
            console.print(table)
        finally:
            console.width = saved
    if dropped:
        console.print(f"[dim]{', '.join(dropped)} left out for width; --wide shows every column[/]")
