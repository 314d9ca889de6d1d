"""``fleet rebalance NAME``: one pass that keeps a fleet at target (cron-safe), or a loop.

A pass takes the fleet's lock, observes the providers and the store, decides
(``fleet.rebalance.decide``) and applies the actions through the executor, printing one
line per action. Exit status of a single pass: 0 when the fleet ends at target (or there
was nothing to do), 3 when it ends short (spot short beyond the critical level, budget),
75 when another command holds the fleet (cron simply tries again next time), 1 for other
errors, among them a provider that could not be read (the pass then does nothing: one line
names the provider). A fleet taken down with ``fleet down`` is left down. ``--every 5m`` loops as a
service (a busy fleet skips that pass); ``--metrics-port`` then serves Prometheus metrics
and ``/healthz``. ``--watch 5s`` is event-driven: it lists the fleet's instances every 5
seconds (no offers, no lock) and runs a pass at once when the set of alive instances or the
recorded interruption notices changed (a loss, a notice, a node that came up), besides the
pass every ``--every`` (default 10 minutes). With ``rebalance.interruption_queue`` on AWS each
look also long-polls the fleet's EventBridge queue for up to the interval and records the
spot interruption and rebalance notices it brings (``fleet.rebalance.notices``).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import click

from fleet.cli.app import App, json_option, pass_app, shown
from fleet.cli.complete import fleet_names
from fleet.cli.lifecycle import EXIT_SHORT, providers_of, short_pool, spec_of, store_of
from fleet.cli.local_cmd import parse_duration
from fleet.errors import FleetError, FleetLockedError
from fleet.rebalance.cycle import PassReport, run_pass
from fleet.state import FleetStatus


@click.command("rebalance")
@click.argument("name", shell_complete=fleet_names)
@click.option(
    "--every",
    "every",
    default=None,
    metavar="DURATION",
    help="Loop: one pass every DURATION (30s, 5m, 1h) until stopped.",
)
@click.option(
    "--passes",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="With --every: stop after this many passes (0 = run until stopped).",
)
@click.option(
    "--watch",
    "watch",
    default=None,
    metavar="DURATION",
    help="Event-driven loop: list the fleet's instances every DURATION (e.g. 5s) and run a pass at once "
    "on a loss or a notice; a pass also runs every --every (default 10m).",
)
@click.option("--dry-run", is_flag=True, help="Print the actions a pass would take; change nothing.")
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    default=None,
    help="With --every: serve Prometheus metrics and /healthz on this port (0 = any free port).",
)
@json_option
@pass_app
def command(
    app: App,
    name: str,
    every: str | None,
    watch: str | None,
    passes: int,
    dry_run: bool,
    metrics_port: int | None,
    as_json: bool,
) -> None:
    """Keep fleet NAME at target: replace lost spot, fall back to on-demand, return to spot."""
    if metrics_port is not None and every is None and watch is None:
        raise FleetError("--metrics-port needs --every or --watch: metrics are served by the looping rebalancer")
    look = None
    if watch is not None:
        look = parse_duration(watch)
        if look <= 0:
            raise FleetError(f"--watch {watch}: give a positive duration such as 5s")
        every = every or "10m"
    if every is None:
        report = _one_pass(app, name, dry_run)
        if report is None:
            _say_down(app, name, as_json)
            return
        _show(app, report, as_json)
        if report.unread:
            raise SystemExit(1)
        if not report.dry_run and not report.at_target:
            raise SystemExit(EXIT_SHORT)
        return
    interval = parse_duration(every)
    if interval <= 0:
        raise FleetError(f"--every {every}: give a positive duration such as 30s, 5m or 1h")
    _loop(app, name, interval, passes, dry_run, metrics_port, as_json, look)


def _one_pass(app: App, name: str, dry_run: bool) -> PassReport | None:
    """One pass; ``None`` when the fleet was taken down (a rebalancer never brings it back)."""
    from fleet.cli.plan import offers_for_spec

    store = store_of(app)
    try:
        record = store.get_fleet(name)
        if record.status == FleetStatus.DOWN:
            return None
        spec = spec_of(record)
        if spec is None:
            raise FleetError(f"fleet {name!r} has no recorded spec; run `fleet repair {name} --spec SPEC`")
        providers = providers_of(app, record)
        offers, _info = offers_for_spec(spec, app, providers)
        if dry_run:
            return run_pass(spec, offers, providers, store, dry_run=True)
        with store.lock(name, "rebalance"):
            if store.get_fleet(name).status == FleetStatus.DOWN:  # taken down while we looked
                return None
            return run_pass(spec, offers, providers, store, environ=os.environ)  # replacements run what `up` gave
    finally:
        store.close()


def _observe_store(app: App, metrics: Any, report: PassReport) -> None:
    """The metrics read from the store after a pass (``Metrics.observe_store``)."""
    store = store_of(app)
    try:
        metrics.observe_store(store, report)
    finally:
        store.close()


def _fingerprint(app: App, name: str, before: object, wait: float = 0.0) -> object:
    """What ``--watch`` compares between looks: the fleet's alive instance ids and the number of
    interruption notices recorded for it, after recording what the providers' event queues brought
    within ``wait`` seconds (``fleet.rebalance.notices``) (``before`` when a provider could not be listed: an
    unreadable provider alone does not start a pass; the pass every ``--every`` says why). It is
    taken before each pass, so what a pass launches starts one more pass (nothing to do), and a
    loss during a pass is never missed."""
    from fleet.provisioning.reconcile import observe
    from fleet.rebalance.notices import drain
    from fleet.state import EventKind

    store = store_of(app)
    try:
        record = store.get_fleet(name)
        if record.status == FleetStatus.DOWN:
            return "down"
        providers = providers_of(app, record)
        obs = observe(providers, name)
        if obs.errors:
            return before
        drained = drain(name, providers, obs.instances, store, wait)  # the event queues, long-polled
        for provider, error in sorted(drained.errors.items()):
            app.err.print(f"error: {provider} interruption queue: {shown(error)}")
        if drained.news:
            obs = observe(providers, name)
            if obs.errors:
                return before
        return frozenset(i.id for i in obs.instances), len(store.events(name, kinds=[EventKind.NOTICE]))
    finally:
        store.close()


def _loop(
    app: App,
    name: str,
    interval: float,
    passes: int,
    dry_run: bool,
    metrics_port: int | None,
    as_json: bool,
    watch: float | None = None,
) -> None:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    metrics = None
    if metrics_port is not None:
        from fleet.rebalance.metrics import Metrics

        metrics = Metrics(name, stale_after=max(60.0, 3 * interval))
        port = metrics.serve(metrics_port)
        app.err.print(f"metrics on port {port}: /metrics, health on /healthz")
    done = 0
    last_pass: float | None = None
    seen: object = None
    while not stop.is_set():
        started = time.time()
        if watch is not None:  # the look before a pass: a change after it starts the next one
            try:
                now_seen = _fingerprint(app, name, seen, watch)
            except FleetError as err:
                app.err.print(f"error: {shown(err)}")
                now_seen = seen
            if last_pass is not None and started - last_pass < interval and now_seen == seen:
                stop.wait(max(0.0, watch - (time.time() - started)))
                continue
            seen = now_seen
        last_pass = started
        try:
            report = _one_pass(app, name, dry_run)
            if report is None:
                _say_down(app, name, as_json)
            else:
                _show(app, report, as_json)
            if metrics is not None and report is not None:
                metrics.observe(report, started)
                _observe_store(app, metrics, report)
        except FleetLockedError as err:
            app.warn(f"skipping this pass: {err}")
            if metrics is not None:
                metrics.failed("busy", started)
        except FleetError as err:
            app.err.print(f"error: {shown(err)}")
            if metrics is not None:
                metrics.failed("error", started)
        done += 1
        if passes and done >= passes:
            break
        stop.wait(max(0.0, (watch if watch is not None else interval) - (time.time() - started)))
    if metrics is not None:
        metrics.close()


def _say_down(app: App, name: str, as_json: bool) -> None:
    if as_json:
        app.emit_json({"fleet": name, "down": True, "results": []})
    else:
        app.console.print(f"fleet {name} is down: nothing to do (`fleet up SPEC` brings it back)")


def _show(app: App, report: PassReport, as_json: bool) -> None:
    if as_json:
        app.emit_json(report.to_dict())
        return
    d = report.decision
    if report.unread:
        for provider, error in sorted(report.unread.items()):
            app.err.print(
                f"[red]fleet {report.fleet}: {provider} could not be read[/], so this pass launched and "
                f"terminated nothing: {error}"
            )
        return
    if report.dry_run:
        for action in d.actions:
            app.console.print(f"would {_line(action.to_dict())}")
    for r in report.results:
        data = r.to_dict()
        status = "done" if r.done else f"not done: {shown(r.message)}"
        app.console.print(f"{_line(data)}: {status}")
    for incident in d.incidents:
        app.err.print(f"[bold red]{incident}[/]")
    for note in [*d.notes, *report.notes]:
        app.console.print(f"[dim]note:[/] {shown(note)}")
    if report.nothing_to_do:
        app.console.print(
            f"fleet {report.fleet}: nothing to do ({d.healthy_weighted_gpus:g} of "
            f"{d.target_weighted_gpus:g} weighted GPUs healthy)"
        )
    elif not report.dry_run:
        state = "at target" if report.at_target else "short"
        app.console.print(
            f"fleet {report.fleet}: {report.running_weighted_gpus:g} of {d.target_weighted_gpus:g} "
            f"weighted GPUs running ({state})"
        )


def _line(a: dict[str, Any]) -> str:
    kind = a["kind"]
    if kind == "launch":
        return f"launch {a['count']} in {short_pool(a['pool'])} {a['market']} ({a['reason']})"
    if kind == "terminate":
        return f"terminate {a['instance']} in {short_pool(a['pool'])} ({a['reason']})"
    return f"raise bid of {a['instance']} to ${a['bid']:.3f}/h (cap ${a['cap']:.3f}/h)"
