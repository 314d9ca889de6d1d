"""Which instances a ``terminate(ids)`` may end: the one rule every adapter keeps.

``Provider.terminate`` says: gone (or going) is success, and an instance this fleet did not create
is never touched. :func:`owned_alive` applies that rule to one listing of the vendor's instances,
so each adapter only says how it lists, how it tells its own mark (a tag, a label) and how it ends
what is left (:func:`end_each` for vendors that end one instance a call).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

log = logging.getLogger("spotfleet.providers")

Row = TypeVar("Row")


def owned_alive(
    provider: str,
    ids: Iterable[str],
    rows: Callable[[], Mapping[str, Row]],
    *,
    owned: Callable[[Row], object],
    alive: Callable[[Row], bool] = lambda row: True,
    noun: str = "instance",
    mark: str = "spotfleet fleet tag",
) -> list[str]:
    """The ``ids`` (deduplicated, in order) that ``rows()`` still lists alive and that carry this
    fleet's mark. ``rows`` is called only when there is an id to look up; an id it does not list,
    or lists not ``alive``, is done already; one without the mark (``owned`` false) is left alone
    with a warning that names it."""
    wanted = list(dict.fromkeys(str(i) for i in ids))
    if not wanted:
        return []
    listed = rows()
    doomed = []
    for iid in wanted:
        row = listed.get(iid)
        if row is None or not alive(row):
            continue
        if not owned(row):
            log.warning("%s: not terminating %s %s: it carries no %s", provider, noun, iid, mark)
            continue
        doomed.append(iid)
    return doomed


def end_each(ids: list[str], end: Callable[[str], None], max_workers: int = 8) -> None:
    """``end(id)`` for each id, up to ``max_workers`` at once; the first error is raised after all ran."""
    if ids:
        with ThreadPoolExecutor(max_workers=min(max_workers, len(ids))) as workers:
            list(workers.map(end, ids))
