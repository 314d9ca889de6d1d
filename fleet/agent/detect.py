"""Build the right watcher for ``--cloud`` (``auto`` probes which metadata service answers).

``auto`` order: the local cloud when ``$SPOTFLEET_NOTICE_FILE`` is set; Vast when running inside
a Vast container (``$CONTAINER_ID`` plus an API key); otherwise GCE, AWS and Azure metadata are
probed in parallel (each with a short timeout) and the first that answers in its own dialect
wins, in that order of preference. No answer -> :class:`WatcherConfigError`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from fleet.agent import aws, azure, gcp, http, local, oci, vast
from fleet.agent.notice import PollingWatcher, TransientError, WatcherConfigError
from fleet.agent.ondemand import OnDemandWatcher

CLOUDS = ("aws", "gcp", "azure", "vast", "oci", "local", "none")


@dataclass(frozen=True)
class WatcherOptions:
    """What the CLI passes through; None means the cloud's own default."""

    url: str | None = None
    interval: float | None = None
    instance_id: str = ""
    notice_file: str | None = None
    rebalance: bool = True


def make_watcher(cloud: str, opts: WatcherOptions = WatcherOptions()) -> PollingWatcher:
    """The watcher for ``cloud`` (one of CLOUDS or ``auto``); WatcherConfigError when unusable."""
    if cloud == "auto":
        cloud = detect_cloud(opts)
    every = {} if opts.interval is None else {"interval": opts.interval}
    if cloud == "aws":
        return aws.AwsWatcher(opts.url, rebalance=opts.rebalance, **every)
    if cloud == "gcp":
        return gcp.GceWatcher(opts.url)
    if cloud == "azure":
        return azure.AzureWatcher(opts.url, vm_name=opts.instance_id, **every)
    if cloud == "vast":
        return vast.VastWatcher(opts.instance_id, url=opts.url, **every)
    if cloud == "oci":
        return oci.OciWatcher(opts.url, **every)
    if cloud == "local":
        return local.LocalWatcher(opts.notice_file, **every)
    if cloud == "none":
        return OnDemandWatcher(**every)
    raise WatcherConfigError(f"unknown cloud {cloud!r}; use one of {', '.join(CLOUDS)} or auto")


def instance_id(cloud: str, *, url: str | None = None) -> str:
    """This node's instance id as its provider's adapter names it: ``$SPOTFLEET_INSTANCE_ID``
    where set (the local cloud sets it), else the cloud's own answer (AWS and GCE metadata, the
    Azure VM name, Vast's ``$CONTAINER_ID``, RunPod's ``$RUNPOD_POD_ID``); "" when ``cloud`` has no such source.
    Raises TransientError when the metadata service does not answer (ask again later)."""
    given = os.environ.get("SPOTFLEET_INSTANCE_ID", "")
    if given:
        return given
    if cloud == "aws":
        return aws.AwsWatcher(url).instance_id()
    if cloud == "gcp":
        return gcp.GceWatcher(url).instance_id()
    if cloud == "azure":
        return azure.AzureWatcher(url).instance_id()
    if cloud == "vast":
        return os.environ.get("CONTAINER_ID", "")
    if cloud == "oci":
        return oci.OciWatcher(url).instance_id()
    if cloud == "runpod":  # RunPod sets it in every pod (its docs: pods/templates/environment-variables)
        return os.environ.get("RUNPOD_POD_ID", "")
    return ""


def detect_cloud(opts: WatcherOptions = WatcherOptions(), *, timeout: float = 1.0) -> str:
    """Which notice source this node has (see the module docstring)."""
    if opts.notice_file or os.environ.get("SPOTFLEET_NOTICE_FILE"):
        return "local"
    if os.environ.get("CONTAINER_ID") and vast.find_api_key():
        return "vast"
    probes: dict[str, Callable[[], bool]] = {
        "gcp": lambda: _answers(
            "GET", f"{gcp.default_url()}/computeMetadata/v1/instance/id", gcp.HEADERS, timeout, flavor=True
        ),
        "aws": lambda: _answers(
            "PUT", f"{aws.default_url()}/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "60"}, timeout
        ),
        "azure": lambda: _answers(
            "GET",
            f"{azure.default_url()}/metadata/instance/compute/name"
            f"?api-version={azure.INSTANCE_API_VERSION}&format=text",
            azure.HEADERS,
            timeout,
        ),
    }
    with ThreadPoolExecutor(len(probes)) as pool:
        futures = {name: pool.submit(probe) for name, probe in probes.items()}
        for name, fut in futures.items():
            if fut.result():
                return name
    raise WatcherConfigError(
        "no interruption-notice source answered (tried GCE, AWS and Azure metadata); pass --cloud explicitly"
    )


def _answers(method: str, url: str, headers: dict[str, str], timeout: float, *, flavor: bool = False) -> bool:
    try:
        resp = http.request(method, url, headers=headers, timeout=timeout)
    except TransientError:
        return False
    if flavor and resp.headers.get("metadata-flavor", "").lower() != "google":
        return False
    return resp.status == 200
