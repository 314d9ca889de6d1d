"""What a Vast create carries: the ask body, the node bootstrap and the store credentials (pure).

``create_body`` builds the ``PUT /api/v0/asks/{id}/`` body: image, disk, ``env``, ``onstart``
(the shared node bootstrap, ``fleet.bootstrap``), our label, and ``price`` for a bid (absent:
on-demand). Vast has no object storage, so a node reaches the spec's checkpoint store (S3, GCS,
Azure) with credentials in its ``env``; :func:`store_credentials` picks them from the caller's
environment by the URI's scheme. They are sent only in this body: never rendered into the
bootstrap text, never in a label, a tag, a log line or a result.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from fleet.bootstrap import boot_for, render
from fleet.model import LaunchRequest
from providers.vast.instances import TAGS_ENV, Label, extra_tags

DEFAULT_IMAGE = "pytorch/pytorch:latest"

#: Checkpoint URI scheme -> the variables its store reads (``fleet.checkpoint.stores``).
STORE_VARIABLES: dict[str, tuple[str, ...]] = {
    "s3": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
           "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "gs": ("GOOGLE_CLOUD_PROJECT", "STORAGE_EMULATOR_HOST"),
    "az": ("AZURE_STORAGE_CONNECTION_STRING",),
}


def store_credentials(checkpoint_uri: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a node needs to reach ``checkpoint_uri``'s store, from ``environ``."""
    scheme = checkpoint_uri.split("://", 1)[0] if "://" in checkpoint_uri else ""
    return {name: environ[name] for name in STORE_VARIABLES.get(scheme, ()) if environ.get(name)}


def label_for(request: LaunchRequest) -> Label:
    plan = request.tags.get("spotfleet:plan", "")
    return Label(request.fleet, request.offer.pool.id, plan, request.token, request.count)


def create_body(request: LaunchRequest, label: Label, bid: float | None, disk_gb: int,
                secrets: Mapping[str, str]) -> dict[str, Any]:
    """The ask body for one instance of ``request``; ``bid`` None means on-demand."""
    env = {**request.node.env, **secrets}
    extra = extra_tags(request.tags)
    if extra:
        env[TAGS_ENV] = json.dumps(extra, sort_keys=True)
    body: dict[str, Any] = {
        "client_id": "me", "image": request.node.image or DEFAULT_IMAGE, "disk": disk_gb, "env": env,
        "onstart": render(boot_for("vast", request)), "label": label.render(), "runtype": "ssh",
        "cancel_unavail": True,      # refuse rather than leave a stopped instance when the bid loses
    }
    if bid is not None:
        body["price"] = bid
    return body
