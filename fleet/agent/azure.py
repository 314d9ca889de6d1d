"""Azure: Scheduled Events (``Preempt``/``Terminate`` for this VM), acknowledged when ready.

Endpoint: ``$SPOTFLEET_AZURE_METADATA_URL`` or ``http://169.254.169.254``; every request carries
``Metadata: true``. The VM's own name comes from ``--instance-id`` or the instance metadata
(``/metadata/instance/compute/name``); events naming other VMs are ignored. After the final
checkpoint, :meth:`AzureWatcher.acknowledge` POSTs ``StartRequests`` so Azure proceeds at once
instead of waiting out ``NotBefore``.
"""

from __future__ import annotations

import json
import os

from fleet.agent import http
from fleet.agent.notice import Notice, PollingWatcher, TransientError, notice_deadline, parse_rfc1123

DEFAULT_URL = "http://169.254.169.254"
API_VERSION = "2020-07-01"
INSTANCE_API_VERSION = "2021-02-01"
HEADERS = {"Metadata": "true"}
EVICTION_TYPES = {"Preempt": "preempt", "Terminate": "terminate"}
#: Azure's documented minimum for Preempt.
NOTICE_WINDOW = 30.0


def default_url() -> str:
    return os.environ.get("SPOTFLEET_AZURE_METADATA_URL") or DEFAULT_URL


class AzureWatcher(PollingWatcher):
    """Polls Scheduled Events every ``interval`` s for an eviction of this VM."""

    cloud = "azure"

    def __init__(self, url: str | None = None, *, vm_name: str = "", interval: float = 1.0, timeout: float = 2.0):
        super().__init__(interval)
        self.url = (url or default_url()).rstrip("/")
        self.vm_name = vm_name
        self.timeout = timeout
        self.events_url = f"{self.url}/metadata/scheduledevents?api-version={API_VERSION}"

    def _vm_name(self) -> str:
        if not self.vm_name:
            resp = http.expect(
                http.request(
                    "GET",
                    f"{self.url}/metadata/instance/compute/name?api-version={INSTANCE_API_VERSION}&format=text",
                    headers=HEADERS,
                    timeout=self.timeout,
                ),
                "instance/compute/name",
            )
            if resp.status != 200 or not resp.text.strip():
                raise TransientError(f"instance/compute/name: HTTP {resp.status}")
            self.vm_name = resp.text.strip()
        return self.vm_name

    def instance_id(self) -> str:
        """This VM's name (the azure adapter's instance id); TransientError when metadata does not say."""
        return self._vm_name()

    def poll_once(self) -> Notice | None:
        name = self._vm_name()
        resp = http.expect(
            http.request("GET", self.events_url, headers=HEADERS, timeout=self.timeout), "scheduledevents"
        )
        if resp.status != 200:
            raise TransientError(f"scheduledevents: HTTP {resp.status}")
        doc = resp.json_object()
        for event in doc.get("Events") or []:
            kind = EVICTION_TYPES.get(str(event.get("EventType")))
            resources = event.get("Resources") or []
            if kind is None or (resources and name not in resources):
                continue
            deadline, detail = notice_deadline(
                event.get("NotBefore"),
                parse_rfc1123,
                NOTICE_WINDOW,
                {**event, "DocumentIncarnation": doc.get("DocumentIncarnation")},
            )
            return Notice(kind=kind, cloud=self.cloud, deadline=deadline, detail=detail)
        return None

    def acknowledge(self, notice: Notice) -> bool:
        """POST StartRequests for the notice's event; transient failures raise TransientError."""
        event_id = notice.detail.get("EventId")
        if not event_id:
            return False
        body = json.dumps({"StartRequests": [{"EventId": event_id}]}).encode()
        resp = http.expect(
            http.request(
                "POST",
                self.events_url,
                body=body,
                timeout=self.timeout,
                headers={**HEADERS, "Content-Type": "application/json"},
            ),
            "scheduledevents ack",
        )
        if resp.status >= 400:
            raise TransientError(f"scheduledevents ack: HTTP {resp.status}")
        return True
