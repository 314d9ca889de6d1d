"""``fleet agent``: watch this node's interruption notice and get the final checkpoint out.

The options it shares with ``fleet run`` and the builders both use are in ``fleet.cli.node_options``.
"""

from __future__ import annotations

import signal
import threading

import click

from fleet.agent import CLOUDS, Notice, respond
from fleet.agent.checkpoints import CheckpointProbe
from fleet.agent.hooks import CommandHook, Hook, SignalHook, parse_signal
from fleet.agent.notice import PollingWatcher
from fleet.cli.app import App, json_option, pass_app
from fleet.cli.node_options import build_reporter, build_watcher, configure_logging, node_options
from fleet.errors import FleetError


@click.command("agent")
@click.option(
    "--cloud",
    type=click.Choice([*CLOUDS, "auto"]),
    default="auto",
    show_default=True,
    help="Where the notice comes from.",
)
@click.option("--hook-signal", default=None, help="Signal to send on a notice (e.g. SIGTERM, SIGUSR1); needs --pid.")
@click.option("--pid", type=int, default=None, help="The training process to signal.")
@click.option("--hook", "hook_command", default=None, help="Shell command to run on a notice (e.g. a drain).")
@node_options
@json_option
@pass_app
def command(
    app: App,
    cloud: str,
    hook_signal: str | None,
    pid: int | None,
    hook_command: str | None,
    deadline_margin: float,
    checkpoint_uri: str | None,
    fleet_name: str,
    instance_id: str,
    state_url: str | None,
    metadata_url: str | None,
    poll_interval: float | None,
    notice_file: str | None,
    no_rebalance: bool,
    as_json: bool,
) -> None:
    """Wait for this node's interruption notice, fire the hook, wait for the final checkpoint.

    Exits 0 with a one-line summary once the checkpoint is committed or the deadline nears
    (or when stopped by SIGTERM/SIGINT before any notice).
    """
    configure_logging()
    hook = _hook(hook_signal, pid, hook_command)
    watcher = build_watcher(
        cloud,
        metadata_url=metadata_url,
        poll_interval=poll_interval,
        instance_id=instance_id,
        notice_file=notice_file,
        no_rebalance=no_rebalance,
    )
    probe = CheckpointProbe(checkpoint_uri) if checkpoint_uri else None
    app.err.print(
        f"fleet agent: watching {watcher.cloud} for interruption notices"
        + (f"; hook: {hook.describe()}" if hook else "; no hook")
    )
    notice = _wait(watcher)
    if notice is None:
        click.echo("stopped before any interruption notice")
        return
    outcome = respond(
        notice,
        hook,
        probe=probe,
        margin=deadline_margin,
        watcher=watcher,
        reporter=build_reporter(state_url, fleet_name, instance_id, watcher),
    )
    if as_json:
        app.emit_json(outcome.to_json())
    else:
        click.echo(outcome.summary())


def _hook(hook_signal: str | None, pid: int | None, hook_command: str | None) -> Hook | None:
    if hook_command and (hook_signal or pid):
        raise FleetError("give either --hook COMMAND or --hook-signal SIG --pid PID, not both")
    if hook_command:
        return CommandHook(hook_command)
    if pid is not None:
        return SignalHook(parse_signal(hook_signal or "SIGTERM"), pid)
    if hook_signal:
        raise FleetError("--hook-signal needs --pid PID (the training process to signal)")
    return None


def _wait(watcher: PollingWatcher) -> Notice | None:
    """Watch in a thread so SIGTERM/SIGINT stop the agent even during a long poll."""
    stop, done = threading.Event(), threading.Event()
    found: list[Notice | None] = [None]
    errors: list[BaseException] = []

    def watch() -> None:
        try:
            found[0] = watcher.wait_for_notice(stop)
        except BaseException as err:  # re-raised in the main thread (a refused key, a bad setting)
            errors.append(err)
        finally:
            done.set()

    def on_signal(_signum: int, _frame: object) -> None:
        stop.set()
        done.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    threading.Thread(target=watch, name="watcher", daemon=True).start()
    while not done.wait(0.5):
        pass
    if errors:
        raise errors[0]
    return found[0]
