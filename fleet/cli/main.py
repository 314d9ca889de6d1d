"""Entry point of the ``fleet`` command: the group, global options and error handling."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import click

from fleet import __version__
from fleet.cli.app import App
from fleet.errors import FleetError
from fleet.home import HOME_ENV
from fleet.safetext import register_environ, scrub_known

#: One module per command (``fleet/cli/<module>.py`` defines ``command``).
COMMAND_MODULES = (
    "spec_cmd",
    "offers",
    "local_cmd",
    "agent",
    "run_cmd",
    "up",
    "status",
    "logs",
    "down",
    "history",
    "list_cmd",
    "repair",
    "plan",
    "check",
    "rebalance",
    "export",
    "simulate",
    "dashboard",
)


def command_name(module: str) -> str:
    """The command a module defines: ``list_cmd`` -> ``list``."""
    return module.removesuffix("_cmd")


_MODULE_OF = {command_name(m): m for m in COMMAND_MODULES}

#: ``fleet --help`` lists the commands in these sections, in this order (a command left out of
#: every section is listed under "Other commands", so a new one is never hidden).
COMMAND_SECTIONS = (
    ("Operate a fleet", ("up", "status", "list", "down", "rebalance", "history", "logs", "dashboard", "repair")),
    ("Plan and price", ("plan", "offers", "simulate", "spec", "check", "export")),
    ("On the node", ("run", "agent")),
    ("Local cloud", ("local",)),
)

#: Exit status of a command-line usage error (unknown option, missing argument): sysexits.h's
#: EX_USAGE, so that it differs from 2, which means a bad spec.
EXIT_USAGE = 64


def _short_help(module: str, limit: int) -> str:
    """The first docstring line of ``command`` in ``fleet/cli/<module>.py``, read without importing
    it (``fleet --help`` stays fast: each command imports what it needs only when it runs)."""
    import ast

    source = Path(__file__).with_name(f"{module}.py").read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == "command":
            return click.utils.make_default_short_help(ast.get_docstring(node) or "", limit)
    return ""


class FleetGroup(click.Group):
    """Loads each command's module only when that command runs, and turns expected failures
    into one line on stderr (traceback only with --debug)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(_MODULE_OF) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in _MODULE_OF:
            return self.commands.get(cmd_name)
        command = importlib.import_module(f"fleet.cli.{_MODULE_OF[cmd_name]}").command
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        width = max(len(n) for n in names)  # one column for every section
        limit = formatter.width - 6 - width
        placed = {n for _, members in COMMAND_SECTIONS for n in members}
        sections = [*COMMAND_SECTIONS, ("Other commands", tuple(n for n in names if n not in placed))]
        for title, members in sections:
            rows = [(name.ljust(width), self._help_of(name, limit)) for name in members if name in names]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

    def _help_of(self, name: str, limit: int) -> str:
        if name in _MODULE_OF:
            return _short_help(_MODULE_OF[name], limit)
        return self.commands[name].get_short_help_str(limit)

    def make_context(self, info_name, args, parent=None, **extra):  # type: ignore[no-untyped-def,override]
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as err:
            err.exit_code = EXIT_USAGE
            raise

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except click.UsageError as err:  # a subcommand's arguments (parsed here)
            err.exit_code = EXIT_USAGE
            raise
        except FleetError as err:
            app = ctx.find_object(App)
            if app is not None and app.debug:
                import traceback

                traceback.print_exc()
            click.echo(f"error: {scrub_known(str(err))}", err=True)
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
@click.option(
    "--home",
    type=click.Path(path_type=Path),
    envvar="SPOTFLEET_HOME",
    help="State directory (default ~/.spotfleet, or $SPOTFLEET_HOME).",
)
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.option(
    "--state",
    "state",
    default=None,
    metavar="URL",
    help="State store: a file, sqlite:///path or postgresql://user@host/db (default $SPOTFLEET_STATE, "
    "else <home>/state.db).",
)
@click.pass_context
def cli(ctx: click.Context, home: Path | None, debug: bool, state: str | None) -> None:
    """Plan, provision and keep alive diversified spot GPU fleets."""
    register_environ(os.environ)  # credentials this process holds are masked in everything it prints
    app = App(debug=debug, state=state)
    if home is not None:
        app.home = home
        os.environ[HOME_ENV] = str(home)  # adapters, caches and started processes use the same folder
    ctx.obj = app


def main() -> None:
    cli(prog_name="fleet")


if __name__ == "__main__":
    main()
    sys.exit(0)
