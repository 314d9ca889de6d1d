"""Shared CLI plumbing: the ``App`` context object, output helpers, error handling."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from fleet.errors import FleetError
from fleet.home import spotfleet_home
from fleet.safetext import safe, scrub_known

if TYPE_CHECKING:
    from rich.console import Console


def default_home() -> Path:
    """Where spotfleet keeps its state: ``$SPOTFLEET_HOME`` or ``~/.spotfleet``."""
    return spotfleet_home()


class OutputClosed(FleetError):
    """stdout was closed by its reader (a pipe such as ``| head``) before a command that changes
    things finished; ``where`` says how far it got."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"the output was closed early (a pipe such as `| head` stopped reading), so the command "
            f"stopped {where}; for scripts use --json, and --yes where a command asks to confirm"
        )


@dataclass
class App:
    """Per-invocation context (``ctx.obj``): where state lives and how to print."""

    home: Path = field(default_factory=default_home)
    debug: bool = False
    state: str | None = None  # --state URL (overrides $SPOTFLEET_STATE)
    #: Set by commands that change things: how far they got, said if stdout closes early
    #: (read-only commands then just stop quietly, as ``git log | head`` does).
    stage: str = ""

    @cached_property
    def console(self) -> Console:
        """stdout, for data and tables (rich is imported on first use: start-up stays fast).
        When the reader goes away (``fleet up ... | head``) the command stops with one line on
        stderr instead of rich's silent exit."""
        app = self

        class _Stdout(_console_class()):
            def on_broken_pipe(self) -> None:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                if app.stage:
                    raise OutputClosed(app.stage)
                raise SystemExit(1)

        return _Stdout(highlight=False)

    @cached_property
    def err(self) -> Console:
        """stderr, for progress, warnings and prompts."""
        return _console_class()(stderr=True, highlight=False)

    @property
    def state_url(self) -> str:
        """The state store location: ``--state``, ``$SPOTFLEET_STATE`` or ``<home>/state.db``
        (a file path, ``sqlite:///path`` or ``postgresql://user@host/db``)."""
        return self.state or os.environ.get("SPOTFLEET_STATE") or str(self.home / "state.db")

    def emit_json(self, data: Any) -> None:
        """Print ``data`` as JSON (control characters come out escaped, as JSON writes them); every
        registered secret value is masked (``fleet.safetext``)."""
        click.echo(scrub_known(json.dumps(data, indent=2, default=str)))

    def warn(self, message: str) -> None:
        self.err.print(f"[yellow]warning:[/] {message}")


def _console_class() -> type[Console]:
    """rich's Console (imported on first use), leaving emoji codes as written everywhere, spinner
    text included: nothing spotfleet prints uses one, provider text that looks like one
    (``:fire:``) stays as the provider wrote it, and rich's emoji table is never loaded."""
    from rich.console import Console
    from rich.text import Text

    class _Console(Console):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(emoji=False, **kwargs)

        def status(self, status: Any, **kwargs: Any) -> Any:
            return super().status(
                Text.from_markup(status, emoji=False) if isinstance(status, str) else status, **kwargs
            )

    return _Console


pass_app = click.make_pass_decorator(App, ensure=True)


def shown(text: Any) -> str:
    """Provider text ready for a rich console: one line, escaped, secrets masked
    (``fleet.safetext.safe``), and its ``[`` escaped so it cannot pass for rich markup."""
    from rich.markup import escape as markup_escape

    return markup_escape(safe(text))


def json_option(f: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(f)


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()
