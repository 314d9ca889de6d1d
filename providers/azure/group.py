"""The resource group every Azure resource of the adapter lives in: found, or created once.

A resource group has one location, fixed at creation (Resource Groups - Create Or Update:
"It cannot be changed after the resource group has been created"); a PUT of an existing group
with another location is refused with 409 ``InvalidResourceGroupLocation``. Launches into
several regions (and the checkpoint storage) all need the group, so :func:`ensure_group`
serialises them per subscription and group name in this process (one lock, one location: the
first caller's), and treats a refusal for a group that exists by then (another process made it
in its own region) as success. The group's location says where its metadata lives; its
resources may be in any region.
"""

from __future__ import annotations

import threading
from typing import Any

from fleet.errors import InstanceNotFoundError, ProviderError
from providers.azure.arm import Arm, wire
from providers.azure.blob_account import TAG_MANAGED

_locks: dict[tuple[str, str, str], threading.Lock] = {}
_guard = threading.Lock()


def _lock(arm: Arm, rg: str) -> threading.Lock:
    with _guard:
        return _locks.setdefault((arm.endpoint, arm.subscription, rg.lower()), threading.Lock())


def find_group(arm: Arm, rg: str) -> dict[str, Any] | None:
    """The resource group ``rg`` (ARM wire format), or None when it does not exist."""
    try:
        return wire(arm.call(lambda: arm.resources.resource_groups.get(rg), f"find resource group {rg}"))
    except InstanceNotFoundError:
        return None


def ensure_group(arm: Arm, rg: str, location: str) -> dict[str, Any]:
    """The resource group ``rg``, created in ``location`` (tagged ``spotfleet:managed``) when missing.

    ``location`` is only used for a group that does not exist yet; a group found (or made by a
    concurrent caller meanwhile) keeps its own. An empty ``location`` for a missing group is a
    ProviderError naming the setting to fill."""
    with _lock(arm, rg):
        group = find_group(arm, rg)
        if group is not None:
            return group
        if not location:
            raise ProviderError(
                "azure",
                f"resource group {rg} does not exist and no region is known for it: set "
                "checkpoint.region (or providers.azure.regions)",
                code="no-region",
            )
        try:
            return wire(
                arm.call(
                    lambda: arm.resources.resource_groups.create_or_update(
                        rg, {"location": location, "tags": {TAG_MANAGED: "true"}}
                    ),
                    f"create resource group {rg}",
                )
            )
        except ProviderError as err:
            if err.code != "InvalidResourceGroupLocation":
                raise
            group = find_group(arm, rg)  # made meanwhile by another process, in its own region
            if group is None:
                raise
            return group
