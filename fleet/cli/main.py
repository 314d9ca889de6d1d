"""Entry point of the ``fleet`` command: the group, global options and error handling."""

from __future__ import annotations

import importlib
import sys
import traceback
from pathlib import Path

import click

from fleet import __version__
from fleet.cli.app import App
from fleet.errors import FleetError

#: One module per command (``fleet/cli/<module>.py`` defines ``command``).
COMMAND_MODULES = ("spec_cmd", "offers", "local_cmd", "agent", "run_cmd",
                   "up", "status", "down", "history", "list_cmd", "repair", "plan", "check", "rebalance", "simulate")


class FleetGroup(click.Group):
    """Turns expected failures into one line on stderr (traceback only with --debug)."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except FleetError as err:
            app = ctx.find_object(App)
            if app is not None and app.debug:
                traceback.print_exc()
            click.echo(f"error: {err}", err=True)
            ctx.exit(_exit_code(err))


def _exit_code(err: FleetError) -> int:
    from fleet.errors import FleetLockedError, SpecError

    if isinstance(err, SpecError):
        return 2
    if isinstance(err, FleetLockedError):
        return 75  # EX_TEMPFAIL: try again later
    return 1


@click.group(cls=FleetGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fleet")
@click.option("--home", type=click.Path(path_type=Path), envvar="SPOTFLEET_HOME",
              help="State directory (default ~/.spotfleet, or $SPOTFLEET_HOME).")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.option("--state", "state", default=None, metavar="URL",
              help="State store: a file, sqlite:///path or postgresql://user@host/db (default $SPOTFLEET_STATE, "
                   "else <home>/state.db).")
@click.pass_context
def cli(ctx: click.Context, home: Path | None, debug: bool, state: str | None) -> None:
    """Plan, provision and keep alive diversified spot GPU fleets."""
    app = App(debug=debug, state=state)
    if home is not None:
        app.home = home
    ctx.obj = app


for _name in COMMAND_MODULES:
    _module = importlib.import_module(f"fleet.cli.{_name}")
    cli.add_command(_module.command)


def main() -> None:
    cli(prog_name="fleet")


if __name__ == "__main__":
    main()
    sys.exit(0)
