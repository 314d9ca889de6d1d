"""``fleet run -- CMD...``: the node's startup wrapper (resume, restart on crash, agent alongside)."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
from pathlib import Path

import click

from fleet import elastic
from fleet.agent import CLOUDS, WatcherConfigError
from fleet.agent.checkpoints import CheckpointProbe
from fleet.agent.detect import instance_id as node_instance_id
from fleet.agent.gpus import gpu_lines
from fleet.agent.hooks import parse_signal
from fleet.agent.logship import NODE_LOG_ENV, LogShipper, node_log_path
from fleet.agent.notice import PollingWatcher
from fleet.agent.supervisor import RunOptions, supervise
from fleet.cli.agent import build_reporter, build_watcher, configure_logging, node_options
from fleet.cli.app import App, json_option, pass_app

log = logging.getLogger("fleet.agent")


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--cloud",
    type=click.Choice([*CLOUDS, "auto", "none"]),
    default="auto",
    show_default=True,
    help="Notice source for the agent that runs alongside ('none': no agent).",
)
@click.option("--hook-signal", default="SIGTERM", show_default=True, help="Signal sent to the job on a notice.")
@click.option(
    "--max-restarts",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Restarts after crashes before giving up.",
)
@click.option(
    "--backoff",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="First restart delay in seconds (doubles each time, at most 60 s).",
)
@click.option(
    "--healthy-after",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    help="Seconds a job must run before a crash for the restart count and backoff to start "
    "again from zero (--max-restarts counts crashes in a row).",
)
@click.option(
    "--name",
    default=None,
    callback=lambda _c, _p, v: _check_name(v),
    help="Lock name: one wrapper per name on a node (default: from the command). Letters, digits, '.', '_' and '-'.",
)
@click.option(
    "--log-every",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Seconds between uploads of the node log ($SPOTFLEET_NODE_LOG) to the checkpoint bucket, for `fleet logs`.",
)
@click.option(
    "--elastic",
    "elastic_nodes",
    default=None,
    metavar="MIN:MAX",
    help="Run JOB under torchrun, elastic between MIN and MAX nodes, rendezvous on the head's "
    "store (python -m fleet.elastic store). Save checkpoints with fleet.checkpoint.dcp.",
)
@click.option(
    "--nproc-per-node",
    default="1",
    show_default=True,
    help="With --elastic: processes per node (a count, or gpu/cpu/auto).",
)
@click.option(
    "--rdzv-endpoint",
    default=None,
    metavar="HOST:PORT",
    help="With --elastic: the rendezvous store (default $SPOTFLEET_HEAD_ADDR:$SPOTFLEET_HEAD_PORT).",
)
@click.option("--rdzv-id", default=None, help="With --elastic: the run id all nodes share (default $SPOTFLEET_FLEET).")
@node_options
@json_option
@click.argument("job", nargs=-1, required=True, type=click.UNPROCESSED)
@pass_app
def command(
    app: App,
    cloud: str,
    hook_signal: str,
    max_restarts: int,
    backoff: float,
    healthy_after: float,
    name: str | None,
    log_every: float,
    elastic_nodes: str | None,
    nproc_per_node: str,
    rdzv_endpoint: str | None,
    rdzv_id: str | None,
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
    job: tuple[str, ...],
) -> None:
    """Run JOB, resuming from the newest checkpoint and restarting it on crashes.

    Starting it twice on one node is harmless: the second start sees the first and exits 0.
    When the first wrapper was killed but its job runs on, the second start adopts the job.
    The job gets $SPOTFLEET_CHECKPOINT_URI and $SPOTFLEET_RESUME_STEP. Checkpoint storage that
    cannot be read (missing bucket, refused credentials) is an error before the job starts.
    With a checkpoint URI, the node log is copied next to the checkpoints while this runs.
    """
    configure_logging()
    if os.environ.get(NODE_LOG_ENV):  # on a node (the bootstrap names its log): which GPUs it has comes
        for line in gpu_lines():  # first, so a node without a working driver shows in its log at once
            log.info("%s", line)
    argv = list(job)
    if elastic_nodes:
        argv = _elastic(argv, elastic_nodes, nproc_per_node, rdzv_endpoint, rdzv_id)
    sig = parse_signal(hook_signal)
    probe = CheckpointProbe(checkpoint_uri) if checkpoint_uri else None
    if probe is not None:
        probe.check()
    watcher = _watcher(
        cloud,
        metadata_url=metadata_url,
        poll_interval=poll_interval,
        instance_id=instance_id,
        notice_file=notice_file,
        no_rebalance=no_rebalance,
    )
    lock_path = app.home / "run" / f"{name or _default_name(argv, checkpoint_uri, instance_id)}.lock"
    shipper = _log_shipper(
        checkpoint_uri, watcher.cloud if watcher is not None else cloud, instance_id, metadata_url, log_every
    )
    try:
        _supervise_and_report(
            app,
            RunOptions(
                argv=argv,
                lock_path=lock_path,
                probe=probe,
                watcher=watcher,
                hook_signal=sig,
                max_restarts=max_restarts,
                backoff=backoff,
                healthy_after=healthy_after,
                margin=deadline_margin,
                reporter=build_reporter(state_url, fleet_name, instance_id, watcher),
                log_shipper=shipper,
            ),
            as_json,
        )
    finally:
        if shipper is not None:  # the last lines (the result above included) reach the bucket
            sys.stdout.flush()
            sys.stderr.flush()
            shipper.close()


def _supervise_and_report(app: App, opts: RunOptions, as_json: bool) -> None:
    result = supervise(opts)
    if as_json:
        app.emit_json(
            {
                "status": result.status,
                "exit_code": result.exit_code,
                "message": result.message,
                "starts": result.starts,
                "restarts": result.restarts,
                "resume_steps": result.resume_steps,
                "notices": [o.to_json() for o in result.outcomes],
                "holder": result.holder,
                "adopted": result.adopted,
            }
        )
    else:
        click.echo(result.message)
    if result.exit_code:
        raise SystemExit(result.exit_code)


def _elastic(argv: list[str], nnodes: str, nproc_per_node: str, endpoint: str | None, run_id: str | None) -> list[str]:
    """JOB under torchrun with the settings of :mod:`fleet.elastic` (their variables exported)."""
    cfg = elastic.settings(nnodes, endpoint=endpoint, run_id=run_id, nproc_per_node=nproc_per_node)
    elastic.check_torch()
    os.environ.update(elastic.torchrun_env(os.environ))
    log.info(
        "elastic: %d to %d nodes, rendezvous %s (run id %s)", cfg.min_nodes, cfg.max_nodes, cfg.endpoint, cfg.run_id
    )
    return elastic.torchrun_argv(cfg, argv)


def _log_shipper(
    checkpoint_uri: str | None, cloud: str, instance_id: str, metadata_url: str | None, every: float
) -> LogShipper | None:
    """The node log's uploader (the supervisor starts it once it runs the job); None without a
    bucket, or off a node (no node log there)."""
    path = node_log_path()
    if not checkpoint_uri or not (os.environ.get(NODE_LOG_ENV) or path.exists()):
        return None
    which = cloud if cloud in CLOUDS else os.environ.get("SPOTFLEET_PROVIDER", "")
    return LogShipper(
        checkpoint_uri, Path(path), lambda: instance_id or node_instance_id(which, url=metadata_url), interval=every
    )


def _watcher(cloud: str, **kwargs: object) -> PollingWatcher | None:
    if cloud == "none":
        return None
    try:
        return build_watcher(cloud, **kwargs)  # type: ignore[arg-type]
    except WatcherConfigError as err:
        if cloud != "auto":
            raise
        log.warning("%s; running without a notice watcher", err)
        return None


_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def _check_name(name: str | None) -> str | None:
    """``--name`` becomes a file name under the lock folder: one plain name, never a path."""
    if name is not None and not _NAME_RE.match(name):
        raise click.BadParameter(
            f"{name[:60]!r} is not a plain name; use letters, digits, '.', '_' and '-' "
            "(at most 128, not starting with '.' or '-')"
        )
    return name


def _default_name(argv: list[str], checkpoint_uri: str | None, instance_id: str) -> str:
    """A stable name from the command, checkpoint URI and instance id: the same job on the same
    node maps to the same lock (nodes sharing a host, as on the local cloud, do not collide)."""
    digest = hashlib.sha1("\0".join([*argv, checkpoint_uri or "", instance_id]).encode()).hexdigest()[:12]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", argv[0].rsplit("/", 1)[-1])[:32] or "job"
    return f"{stem}-{digest}"
