"""What ``fleet up/status/down/history/list/repair`` share as a face: exit statuses, the
confirmation prompt, and the small formatters their tables use (``fleet.views.format``).

The store, a fleet's providers and spec, and the reconciled look at a fleet are use cases
(``fleet.operations.workspace``, ``fleet.operations.look``), not CLI plumbing."""

from __future__ import annotations

import sys

import click

from fleet.errors import FleetError
from fleet.views.format import duration, money, short_pool  # noqa: F401  (the tables' formatters)

#: Exit status when a fleet ends short of its plan (matches ``fleet plan`` for infeasible specs).
EXIT_SHORT = 3
#: Exit status of ``fleet plan`` (and ``fleet export``) when the plan cannot meet the spec.
EXIT_INFEASIBLE = 3


def confirm(question: str, *, yes: bool, as_json: bool) -> None:
    """Ask ``question`` unless ``yes``; refuse to guess when nobody can answer."""
    if yes:
        return
    if as_json or not sys.stdin.isatty():
        raise FleetError(
            f"{question.rstrip('?')}: not confirmed (no terminal to ask on); nothing was changed; "
            "pass --yes to proceed without a prompt"
        )
    sys.stdout.flush()  # what the question is about is on screen (or in the pipe) first
    try:
        answer = click.confirm(question, default=False, err=True)
    except click.Abort:  # Ctrl-C or end of input at the prompt
        answer = False
    if not answer:
        raise FleetError(f"{question.rstrip('?')}: not confirmed; nothing was changed")
