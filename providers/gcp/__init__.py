"""The GCP adapter: Spot VMs on Compute Engine, checkpoints on Cloud Storage.

Importing this package registers it for ``backend: cloud`` (``providers.registry``); it needs
``pip install 'spotfleet[gcp]'`` (google-cloud-compute, google-cloud-storage).
"""

import google.cloud.compute_v1  # noqa: F401  (fail early, naming the extra, when the SDK is missing)

from providers.gcp.check import check
from providers.gcp.provider import GcpProvider, from_spec
from providers.registry import register_cloud_adapter

register_cloud_adapter("gcp", from_spec, check=check)

__all__ = ["GcpProvider"]
