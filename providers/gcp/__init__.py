"""The GCP adapter: Spot VMs on Compute Engine, checkpoints on Cloud Storage.

Its registration record (``RECORD``, listed in ``providers.registry``) says it needs
``pip install 'spotfleet[gcp]'`` (google-cloud-compute, google-cloud-storage). The SDK is only
looked for before the adapter is built (importing it takes seconds); it is imported when a call needs it.
"""

from __future__ import annotations

from providers.gcp.settings import GcpSettings
from providers.kit.record import ProviderRecord, on_call

RECORD = ProviderRecord(
    "gcp",
    title="GCP",
    settings=GcpSettings,
    factory=on_call("providers.gcp.provider:from_spec"),
    check=on_call("providers.gcp.check:check"),
    preflight=on_call("providers.gcp.project:resolve_project"),
    extra="gcp",
    sdk_modules=("google.cloud.compute_v1",),
    notice_seconds=30,
    spot=True,
    zones=True,
    checkpoint_scheme="gs",
    agent_cloud="gcp",
    pulumi_stack="stacks.gcp:GcpFleet",
    summary="GCP Compute Engine Spot VMs, Cloud Storage checkpoints",
)
