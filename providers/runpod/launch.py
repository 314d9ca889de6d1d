"""What a RunPod create carries: the pod body, the node bootstrap and the store settings (pure).

``create_body`` builds the ``POST /v2/pods`` body: ``name``, ``image``, ``gpu: {id, count}``,
``cloud``, ``dataCenterIds`` (the pool's data center), ``disk``, ``env`` and ``args``. A pod is a
container, and v2 has no start-up script field: the container's command is ``args`` (what
``docker run IMAGE ARGS`` runs), so the shared node bootstrap (``fleet.bootstrap``) travels
base64-encoded in the variable ``SPOTFLEET_BOOT`` and :data:`START_ARGS` decodes and runs it,
then keeps the container alive (the job runs under the node agent in the background, as on
every cloud). The image needs ``bash``, ``base64`` and a Python >= 3.10 (the default,
RunPod's PyTorch image, has them).

A RunPod host has no cloud identity, so, as on Vast, a node reaches the spec's checkpoint store
(S3, GCS, Azure) with the scoped, revocable credentials ``fleet up`` grants the fleet
(``fleet.provisioning.node_credentials``), in the pod's ``env`` only: never in the bootstrap
text, the name, a label, a log line or a result. :func:`store_settings` adds the store's
non-secret settings (region, endpoint).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from fleet.bootstrap import boot_for, render
from fleet.model import LaunchRequest
from providers.kit.node_store import store_scheme, store_settings  # noqa: F401
from providers.kit.rented import Label, extra_tags
from providers.runpod.instances import LABEL_ENV, NAME_PREFIX, TAGS_ENV
from providers.runpod.offers import PodShape

DEFAULT_IMAGE = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"
BOOT_ENV = "SPOTFLEET_BOOT"
#: The container's command: run the bootstrap from ``$SPOTFLEET_BOOT``, then stay up.
START_ARGS = (
    'bash -c \'printf %s "$SPOTFLEET_BOOT" | base64 -d > /tmp/spotfleet-boot.sh'
    " && bash /tmp/spotfleet-boot.sh; exec sleep infinity'"
)


def create_body(
    request: LaunchRequest, shape: PodShape, label: Label, disk_gb: int, secrets: Mapping[str, str]
) -> dict[str, Any]:
    """The ``POST /v2/pods`` body for one pod of ``request``."""
    env = {
        **request.node.env,
        **secrets,
        LABEL_ENV: label.render(),
        BOOT_ENV: base64.b64encode(render(boot_for("runpod", request)).encode()).decode(),
    }
    extra = extra_tags(request.tags)
    if extra:
        env[TAGS_ENV] = json.dumps(extra, sort_keys=True)
    return {
        "name": f"{NAME_PREFIX}{request.fleet}",
        "image": request.node.image or DEFAULT_IMAGE,
        "gpu": {"id": shape.gpu_id, "count": shape.count},
        "cloud": shape.cloud,
        "dataCenterIds": [request.offer.pool.zone] if request.offer.pool.zone else [],
        "disk": disk_gb,
        "env": {k: str(v) for k, v in env.items()},
        "args": START_ARGS,
    }
