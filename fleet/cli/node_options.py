"""What ``fleet agent`` and ``fleet run`` share on a node: the option set (:func:`node_options`)
and the small builders that turn those options into a notice watcher and a state reporter."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import Any

import click

from fleet.agent import Notice, WatcherOptions, make_watcher
from fleet.agent.notice import PollingWatcher
from fleet.agent.report import report_notice
from fleet.agent.runner import Reporter


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
