"""``fleet agent``: watch this node's interruption notice and get the final checkpoint out.

Also the option set shared with ``fleet run`` (:func:`node_options`) and the small builders both
commands use to turn options into a watcher, a checkpoint probe and a state reporter.
"""

from __future__ import annotations

import functools
import logging
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import click

from fleet.agent import CLOUDS, Notice, WatcherOptions, make_watcher, respond
from fleet.agent.checkpoints import CheckpointProbe
from fleet.agent.hooks import CommandHook, Hook, SignalHook, parse_signal
from fleet.agent.notice import PollingWatcher
from fleet.agent.report import report_notice
from fleet.agent.runner import Reporter
from fleet.cli.app import App, json_option, pass_app
from fleet.errors import FleetError


def node_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by ``fleet agent`` and ``fleet run``: notice source, checkpoint, reporting."""
    options = [
        click.option(
            "--deadline-margin",
            type=click.FloatRange(min=0),
            default=5.0,
            show_default=True,
            help="Stop waiting for the final checkpoint this many seconds before the deadline.",
        ),
        click.option(
            "--checkpoint-uri",
            envvar="SPOTFLEET_CHECKPOINT_URI",
            default=None,
            help="Checkpoint storage to watch (default $SPOTFLEET_CHECKPOINT_URI).",
        ),
        click.option(
            "--fleet",
            "fleet_name",
            envvar="SPOTFLEET_FLEET",
            default="",
            help="Fleet name for the report (default $SPOTFLEET_FLEET).",
        ),
        click.option(
            "--instance-id",
            envvar="SPOTFLEET_INSTANCE_ID",
            default="",
            help="This node's id: report key; the Vast instance id; the Azure VM name.",
        ),
        click.option(
            "--state",
            "state_url",
            default=None,
            metavar="URL",
            help="Report the interruption to this state store (path or sqlite:///path).",
        ),
        click.option(
            "--metadata-url",
            default=None,
            metavar="URL",
            help="Override the notice source's base URL (tests, proxies).",
        ),
        click.option(
            "--poll-interval",
            type=click.FloatRange(min=0.01),
            default=None,
            help="Seconds between polls (default: aws/azure 1, vast 2, local 0.1; gcp long-polls).",
        ),
        click.option(
            "--notice-file", default=None, help="Local cloud: the notice file (default $SPOTFLEET_NOTICE_FILE)."
        ),
        click.option("--no-rebalance", is_flag=True, help="AWS: ignore rebalance recommendations."),
    ]
    return functools.reduce(lambda acc, opt: opt(acc), reversed(options), f)


def build_watcher(
    cloud: str,
    *,
    metadata_url: str | None,
    poll_interval: float | None,
    instance_id: str,
    notice_file: str | None,
    no_rebalance: bool,
) -> PollingWatcher:
    return make_watcher(
        cloud,
        WatcherOptions(
            url=metadata_url,
            interval=poll_interval,
            instance_id=instance_id,
            notice_file=notice_file,
            rebalance=not no_rebalance,
        ),
    )


def build_reporter(
    state_url: str | None, fleet_name: str, instance_id: str, watcher: PollingWatcher | None = None
) -> Reporter | None:
    """Reports to ``state_url`` under ``instance_id``, or the id the watcher learned (Azure VM name)."""
    if not state_url:
        return None

    def report(notice: Notice, outcome: dict[str, Any]) -> bool:
        node = instance_id or getattr(watcher, "vm_name", "") or getattr(watcher, "instance_id", "")
        return report_notice(state_url, fleet_name, node, notice, outcome)

    return report


def configure_logging() -> None:
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s fleet-agent %(levelname)s %(message)s"
    )


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
