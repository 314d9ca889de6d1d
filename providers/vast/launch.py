"""What a Vast create carries: the ask body, the node bootstrap and the store settings (pure).

``create_body`` builds the ``PUT /api/v0/asks/{id}/`` body: image, disk, ``env``, ``onstart``
(the shared node bootstrap, ``fleet.bootstrap``), our label, and ``price`` for a bid (absent:
on-demand). Vast has no object storage and its hosts are third parties' machines with no cloud
identity, so a node reaches the spec's checkpoint store (S3, GCS, Azure) with credentials in its
``env``: never the operator's own, only the scoped, revocable ones that ``fleet up`` grants the
fleet (``fleet.provisioning.node_credentials``, handed over by ``VastProvider.use_node_credentials``).
:func:`store_settings` adds the store's non-secret settings (region, endpoint) from the caller's
environment by the URI's scheme (``providers.kit.node_store``). Both are sent only in this body: never rendered into the
bootstrap text, never in a label, a tag, a log line or a result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fleet.bootstrap import boot_for, render
from fleet.model import LaunchRequest
from providers.kit.node_store import STORE_SETTINGS, store_scheme, store_settings  # noqa: F401 (re-exported)
from providers.kit.rented import Label, extra_tags  # noqa: F401
from providers.vast.instances import TAGS_ENV

DEFAULT_IMAGE = "pytorch/pytorch:latest"


def label_for(request: LaunchRequest) -> Label:
    return Label.of(request)


def create_body(
    request: LaunchRequest, label: Label, bid: float | None, disk_gb: int, secrets: Mapping[str, str]
) -> dict[str, Any]:
    """The ask body for one instance of ``request``; ``bid`` None means on-demand."""
    env = {**request.node.env, **secrets}
    extra = extra_tags(request.tags)
    if extra:
        env[TAGS_ENV] = json.dumps(extra, sort_keys=True)
    body: dict[str, Any] = {
        "client_id": "me",
        "image": request.node.image or DEFAULT_IMAGE,
        "disk": disk_gb,
        "env": env,
        "onstart": render(boot_for("vast", request)),
        "label": label.render(),
        "runtype": "ssh",
        "cancel_unavail": True,  # refuse rather than leave a stopped instance when the bid loses
    }
    if bid is not None:
        body["price"] = bid
    return body
