"""What a Lambda launch carries: the launch body with the node bootstrap as cloud-init user data (pure).

``POST /instance-operations/launch`` takes the region, the type, exactly one SSH key name, the
quantity, a name, tags, an image and ``user_data``: "an instance configuration string in a valid
cloud-init user-data format ... plain text ... at most 1MB" (API reference, ``InstanceLaunchRequest``).
The fleet bootstrap (``fleet.bootstrap``) is a bash script, which cloud-init runs as user data as
it is (a ``#!`` first line), once, on the first boot. A Lambda node has no cloud identity: the
scoped checkpoint-store credentials ``fleet up`` grants the fleet and the store's non-secret
settings reach it as the bootstrap's secret environment, written only into ``user_data``, which
the API never returns (write-only), never into tags, the name, a log line or a result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet.bootstrap import boot_for, render
from fleet.errors import ProviderError
from fleet.model import LaunchRequest
from providers.lambda_cloud.errors import PROVIDER
from providers.lambda_cloud.instances import instance_name, launch_tags

#: The reference's limit on user data.
MAX_USER_DATA = 1_000_000


def user_data(request: LaunchRequest, secret_env: Mapping[str, str]) -> str:
    """The cloud-init user data of ``request``'s nodes: the fleet bootstrap."""
    text = render(boot_for(PROVIDER, request, secret_env))
    if len(text.encode()) > MAX_USER_DATA:
        raise ProviderError(
            PROVIDER,
            f"the node bootstrap is {len(text.encode())} bytes, over Lambda's 1 MB user-data "
            "limit; shorten node.startup or node.env",
            code="user-data-too-large",
        )
    return text


def launch_body(
    request: LaunchRequest,
    count: int,
    key_name: str,
    secret_env: Mapping[str, str],
    image_family: str = "",
    *,
    now: float,
) -> dict[str, Any]:
    """The launch body for ``count`` more instances of ``request``'s pool, sent at ``now``."""
    pool = request.offer.pool
    try:
        tags = launch_tags(request.tags, request.fleet, pool, request.token, now)
    except ValueError as err:
        raise ProviderError(PROVIDER, f"pool {pool.id}: {err}", code="tag-too-long") from None
    body: dict[str, Any] = {
        "region_name": pool.region,
        "instance_type_name": pool.instance_type,
        "ssh_key_names": [key_name],
        "quantity": count,
        "name": instance_name(request.fleet, request.token),
        "tags": tags,
        "user_data": user_data(request, secret_env),
    }
    if image_family:  # node.image names a disk image of other clouds (or a container): not used here
        body["image"] = {"family": image_family}
    return body
