"""``fleet logs NAME [INSTANCE]``: the node logs a fleet's agents uploaded to its bucket, or an
instance's console log from its provider (``--console``). Parses and renders only: the reading
is :mod:`fleet.nodelogs`. Log text is escaped before it reaches the terminal.

Exit status: 0; 1 when there is nothing to show (no such log, no bucket); 130 after Ctrl-C
while following.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import click

from fleet import nodelogs
from fleet.cli.app import App, json_option, pass_app
from fleet.cli.complete import fleet_names, instance_ids
from fleet.cli.lifecycle import duration, providers_of, store_of
from fleet.cli.tables import Column, print_table
from fleet.errors import FleetError

#: Exit status after Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


@click.command("logs")
@click.argument("name", shell_complete=fleet_names)
@click.argument("instance", required=False, shell_complete=instance_ids)
@click.option("--follow", "-f", is_flag=True, help="Keep printing what the node uploads until it ends (Ctrl-C stops).")
@click.option("--tail", type=click.IntRange(min=0), default=None, help="Only the last N lines.")
@click.option(
    "--console",
    "console",
    is_flag=True,
    help="The provider's console (serial port) log of INSTANCE instead: for a node that never got as far as the agent.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="Seconds between reads with --follow.",
)
@json_option
@pass_app
def command(
    app: App,
    name: str,
    instance: str | None,
    follow: bool,
    tail: int | None,
    console: bool,
    interval: float,
    as_json: bool,
) -> None:
    """Show the node logs of fleet NAME (bootstrap, agent and job output), as its nodes upload them.

    Without INSTANCE: the logs there are (instance, size, last upload). With INSTANCE: that
    node's log. The same on every provider: nodes copy their log to the fleet's bucket every
    few seconds and when `fleet run` ends.
    """
    from providers.registry import local_cloud_root

    store = store_of(app)
    record = store.get_fleet(name)
    if console:
        if instance is None:
            raise FleetError("--console reads one instance's console: name it (fleet logs NAME INSTANCE --console)")
        provider, text = nodelogs.console_of(providers_of(app, record), name, instance)
        _show_console(app, provider, instance, text, tail, as_json)
        return
    uri = nodelogs.fleet_bucket(store, record, local_cloud_root(app.home))
    bucket = _open(uri)
    if instance is None:
        if follow or tail is not None:
            raise FleetError(
                f"--follow and --tail read one node's log: name its INSTANCE (`fleet logs {name}` lists them)"
            )
        _show_list(app, name, uri, nodelogs.list_logs(bucket), as_json)
        return
    got = nodelogs.read_log(bucket, instance)
    if got is None:
        raise FleetError(
            f"no log from instance {instance!r} in {uri} yet: its node uploads one every few seconds "
            f"once `fleet run` starts there; `fleet logs {name} {instance} --console` shows a node that "
            "never got that far"
        )
    meta, data = got
    if tail is not None:
        data = nodelogs.last_lines(data, tail)
    elif meta.offset and not as_json:
        app.err.print(f"[dim](the first {meta.offset} bytes of this log were not kept)[/]")
    try:
        _emit(instance, data, as_json, meta=meta if not follow else None)
        if follow and not meta.final:
            _follow(bucket, instance, meta.size, interval, as_json)
    except KeyboardInterrupt:
        click.echo(
            "\ninterrupted"
            + (": stopped following (the node keeps uploading; run the command again to resume)" if follow else ""),
            err=True,
        )
        raise SystemExit(EXIT_INTERRUPTED) from None


def _open(uri: str) -> Any:
    from fleet.checkpoint.stores import open_store

    return open_store(uri)


def _emit(instance: str, data: bytes, as_json: bool, *, meta: nodelogs.NodeLog | None = None) -> None:
    if as_json:
        doc: dict[str, Any] = {"instance": instance, "text": data.decode("utf-8", errors="replace")}
        if meta is not None:
            doc.update(json.loads(meta.to_json()))
        click.echo(json.dumps(doc))
    elif data:
        click.echo(nodelogs.decode(data), nl=False)


def _follow(bucket: Any, instance: str, since: int, interval: float, as_json: bool) -> None:
    for chunk in nodelogs.follow(bucket, instance, since=since, stop=threading.Event(), interval=interval):
        _emit(instance, chunk, as_json)


def _show_list(app: App, name: str, uri: str, logs: list[nodelogs.NodeLog], as_json: bool) -> None:
    if as_json:
        app.emit_json({"fleet": name, "bucket": uri, "logs": [json.loads(m.to_json()) for m in logs]})
        return
    if not logs:
        app.console.print(
            f"no node logs in {nodelogs.printable(uri)} yet (nodes upload theirs every few seconds "
            "once `fleet run` starts)",
            markup=False,
        )
        return
    now = time.time()
    rows = [
        [
            nodelogs.printable(m.instance),
            _size(m.size),
            f"{duration(now - m.updated_at)} ago",
            "ended" if m.final else "running",
        ]
        for m in logs
    ]
    print_table(
        app.console,
        f"fleet {name}: node logs in {nodelogs.printable(uri)}",
        [Column("instance"), Column("size", right=True), Column("updated"), Column("agent")],
        rows,
    )
    app.console.print(f"[dim]fleet logs {name} INSTANCE [--tail N] [--follow] shows one[/]")


def _show_console(app: App, provider: str, instance: str, text: str, tail: int | None, as_json: bool) -> None:
    data = text.encode()
    if tail is not None:
        data = nodelogs.last_lines(data, tail)
    if as_json:
        app.emit_json({"instance": instance, "provider": provider, "console": data.decode("utf-8", errors="replace")})
    elif data:
        click.echo(nodelogs.decode(data), nl=not data.endswith(b"\n"))
    else:
        click.echo(f"{provider} has no console output for {instance} yet", err=True)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MiB"
