"""GCE: the ``instance/preempted`` metadata key, long-polled with ``wait_for_change``.

Endpoint: ``http://$GCE_METADATA_HOST`` (the variable Google's client libraries honour) or
``http://metadata.google.internal``. Every request carries ``Metadata-Flavor: Google``. The
watcher reads the key once, then blocks on ``?wait_for_change=true&last_etag=...&timeout_sec=N``
so a preemption is seen the moment the metadata server flips the value (no polling delay).
"""

from __future__ import annotations

import os
import time
import urllib.parse

from fleet.agent import http
from fleet.agent.notice import Notice, PollingWatcher, TransientError

DEFAULT_HOST = "metadata.google.internal"
HEADERS = {"Metadata-Flavor": "Google"}
#: Spot VMs get about 30 s between the ACPI soft-off and the hard-off.
NOTICE_WINDOW = 30.0


def default_url() -> str:
    return f"http://{os.environ.get('GCE_METADATA_HOST') or DEFAULT_HOST}"


class GceWatcher(PollingWatcher):
    """Long-polls ``instance/preempted``; a ``TRUE`` value is a ``preempt`` notice."""

    cloud = "gcp"

    def __init__(self, url: str | None = None, *, timeout_sec: int = 60, notice_window: float = NOTICE_WINDOW):
        super().__init__(0.0)
        self.url = (url or default_url()).rstrip("/")
        self.timeout_sec = timeout_sec
        self.notice_window = notice_window
        self._etag: str | None = None

    def instance_id(self) -> str:
        """This VM's id as the gcp adapter names it: ``<zone>/<name>`` (from ``instance/zone``,
        ``projects/N/zones/<zone>``, and ``instance/name``); TransientError when metadata does not say."""
        parts = []
        for key in ("zone", "name"):
            resp = http.expect(
                http.request("GET", f"{self.url}/computeMetadata/v1/instance/{key}", headers=HEADERS, timeout=2.0),
                f"instance/{key}",
            )
            value = resp.text.strip().rsplit("/", 1)[-1]
            if resp.status != 200 or not value:
                raise TransientError(f"instance/{key}: HTTP {resp.status}")
            parts.append(value)
        return "/".join(parts)

    def poll_once(self) -> Notice | None:
        path = f"{self.url}/computeMetadata/v1/instance/preempted"
        timeout = 2.0
        if self._etag is not None:
            query = urllib.parse.urlencode(
                {"wait_for_change": "true", "last_etag": self._etag, "timeout_sec": self.timeout_sec}
            )
            path, timeout = f"{path}?{query}", self.timeout_sec + 5.0
        resp = http.expect(http.request("GET", path, headers=HEADERS, timeout=timeout), "instance/preempted")
        if resp.status != 200:
            raise TransientError(f"instance/preempted: HTTP {resp.status}")
        if resp.headers.get("metadata-flavor", "").lower() != "google":
            raise TransientError("instance/preempted: answer lacks Metadata-Flavor: Google")
        self._etag = resp.headers.get("etag") or self._etag or ""
        if resp.text.strip().upper() == "TRUE":
            return Notice(
                kind="preempt",
                cloud=self.cloud,
                deadline=time.time() + self.notice_window,
                detail={"preempted": "TRUE", "deadline_assumed": True},
            )
        return None
