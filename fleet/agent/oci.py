"""OCI: a preemptible instance gets no notice, so this watcher never reports one.

Oracle's preemptible-instance page says the capacity "can be reclaimed at any time" and that
"when preemptible capacity is reclaimed, the instance is terminated"; the only signal is an
Events-service event delivered outside the instance, after the fact
(https://docs.oracle.com/iaas/Content/Compute/Concepts/preemptible.htm). Nothing on the instance
metadata service announces it. So an OCI node is a no-notice node, like a Vast node that loses
its host: periodic checkpoints carry the work, and the fleet learns of the loss from the provider
(the instance leaves ``ListInstances``' live states), not from the node.

The watcher still answers ``instance_id`` from the instance metadata service v2
(``GET http://169.254.169.254/opc/v2/instance/id`` with ``Authorization: Bearer Oracle``,
https://docs.oracle.com/iaas/Content/Compute/Tasks/gettingmetadata.htm), which the agent uses to
name its node.
"""

from __future__ import annotations

import os

from fleet.agent import http
from fleet.agent.notice import Notice, PollingWatcher, TransientError

DEFAULT_URL = "http://169.254.169.254"
HEADERS = {"Authorization": "Bearer Oracle"}
#: Nothing to poll; the agent's loop wakes this rarely.
INTERVAL = 60.0


def default_url() -> str:
    return os.environ.get("SPOTFLEET_OCI_METADATA_URL") or DEFAULT_URL


class OciWatcher(PollingWatcher):
    """A no-notice watcher: :meth:`poll_once` is always None."""

    cloud = "oci"

    def __init__(self, url: str | None = None, *, interval: float = INTERVAL):
        super().__init__(interval)
        self.url = (url or default_url()).rstrip("/")

    def instance_id(self) -> str:
        """This instance's OCID; TransientError when the metadata service does not say."""
        resp = http.request("GET", f"{self.url}/opc/v2/instance/id", headers=HEADERS, timeout=2.0)
        if resp.status != 200 or not resp.text.strip():
            raise TransientError(f"opc/v2/instance/id: HTTP {resp.status}")
        return resp.text.strip()

    def poll_once(self) -> Notice | None:
        return None
