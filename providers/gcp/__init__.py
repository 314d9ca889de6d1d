"""The GCP adapter: Spot VMs on Compute Engine, checkpoints on Cloud Storage.

Importing this package registers it for ``backend: cloud`` (``providers.registry``); it needs
``pip install 'spotfleet[gcp]'`` (google-cloud-compute, google-cloud-storage). The SDK is only
looked for here (importing it takes seconds); it is imported when a call needs it.
"""

from providers.registry import register_cloud_adapter, require_sdk

require_sdk("google.cloud.compute_v1")       # fail early, naming the extra

from providers.gcp.check import check  # noqa: E402
from providers.gcp.provider import GcpProvider, from_spec  # noqa: E402

register_cloud_adapter("gcp", from_spec, check=check)

__all__ = ["GcpProvider"]
