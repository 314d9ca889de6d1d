"""``fleet dashboard``: the fleets in a browser, read-only, served from this machine."""

from __future__ import annotations

import click

from fleet.cli.app import App, pass_app
from fleet.errors import FleetError


@click.command("dashboard")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="TCP port to listen on (0: any free port).",
)
@click.option(
    "--bind",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; any address but loopback requires the token printed in the URL.",
)
@click.option(
    "--state",
    "state_url",
    default=None,
    metavar="URL",
    help="State store to read (path, sqlite:///path or postgresql://...); default as every command.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=1),
    default=5.0,
    show_default=True,
    help="Seconds between the page's refreshes.",
)
@click.option(
    "--look-every",
    "look_seconds",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds between looks at the providers (each reconciles the fleet); polls in between "
    "reuse the last look, and ?refresh=1 looks at once.",
)
@pass_app
def command(app: App, port: int, bind: str, state_url: str | None, interval: float, look_seconds: float) -> None:
    """Serve a read-only web page of the fleets: state, cost, charts, interruptions, logs."""
    from fleet.dashboard.server import Dashboard, Source

    if state_url:
        app.state = state_url
    try:
        server = Dashboard(Source(app, look_seconds=look_seconds), bind, port, interval=interval)
    except OSError as err:
        raise FleetError(
            f"cannot listen on {bind}:{port}: {err.strerror or err}; pick another --port "
            "(0 takes any free one) or --bind"
        ) from None
    click.echo(f"dashboard of {app.state_url} at {server.url} (read-only; Ctrl-C stops it)", err=False)
    if server.token:
        click.echo(f"bound to {bind}: the token in that URL is required on every request", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
