"""When Azure deleted a VM, from the subscription's Activity Log (Azure Monitor).

A Spot VM with evictionPolicy Delete leaves nothing to list once Azure evicts it; the Activity
Log keeps the ``Microsoft.Compute/virtualMachines/delete`` operation of the VM for 90 days.
:func:`deletions` reads the resource group's events of the last ``lookback`` seconds
(``GET /subscriptions/{id}/providers/Microsoft.Insights/eventtypes/management/values``,
api-version 2015-04-01, ``$filter`` on ``eventTimestamp`` and ``resourceGroupName``, pages
through ``nextLink``) through the resource client's pipeline (same credential, endpoint and
error mapping as every other call), and returns the time of each wanted VM's last succeeded
delete. VMs without such an event are left out: their end is then dated by whoever looked.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from providers.azure.arm import Arm
from providers.azure.instances import parse_time

API_VERSION = "2015-04-01"
DELETE_OPERATION = "microsoft.compute/virtualmachines/delete"
DEFAULT_LOOKBACK = 7 * 86400.0
MAX_PAGES = 50


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def events_url(subscription: str, resource_group: str, start: float, end: float) -> str:
    """The Activity Log query of ``resource_group``'s events between two epoch times."""
    flt = (
        f"eventTimestamp ge '{_stamp(start)}' and eventTimestamp le '{_stamp(end)}' "
        f"and resourceGroupName eq '{resource_group}'"
    )
    return (
        f"/subscriptions/{subscription}/providers/Microsoft.Insights/eventtypes/management/values"
        f"?api-version={API_VERSION}&$filter={quote(flt)}"
    )


def delete_times(events: Iterable[dict[str, Any]], names: set[str]) -> dict[str, float]:
    """VM name (of ``names``, compared case-blind) -> time of its last succeeded delete event."""
    wanted = {n.lower(): n for n in names}
    out: dict[str, float] = {}
    for e in events:
        if str((e.get("operationName") or {}).get("value") or "").lower() != DELETE_OPERATION:
            continue
        if str((e.get("status") or {}).get("value") or "") != "Succeeded":
            continue
        name = wanted.get(str(e.get("resourceId") or "").rsplit("/", 1)[-1].lower())
        when = parse_time(e.get("eventTimestamp"))
        if name is not None and when is not None and when > out.get(name, 0.0):
            out[name] = when
    return out


def deletions(
    arm: Arm, resource_group: str, names: Iterable[str], *, lookback: float = DEFAULT_LOOKBACK, now: float | None = None
) -> dict[str, float]:
    """When Azure deleted these VMs (see the module doc); raises ProviderError when the log cannot be read."""
    wanted = set(names)
    if not wanted:
        return {}
    end = time.time() if now is None else now
    url: str | None = events_url(arm.subscription, resource_group, end - lookback, end)
    events: list[dict[str, Any]] = []
    for _ in range(MAX_PAGES):
        if not url:
            break
        page_url = url

        def fetch() -> dict[str, Any]:
            from azure.core.rest import HttpRequest

            response = arm.resources.send_request(HttpRequest("GET", page_url))
            response.raise_for_status()
            return response.json()

        page = arm.call(fetch, f"read the activity log of {resource_group}")
        events += page.get("value") or []
        url = page.get("nextLink")
    return delete_times(events, wanted)
