"""The Vast.ai adapter (``pip install 'spotfleet[vast]'``): REST over httpx, registered as ``vast``.

``$SPOTFLEET_VAST_URL`` points it at another server (default https://console.vast.ai);
the key comes from ``$VAST_API_KEY`` or ``~/.config/vastai/vast_api_key``.
"""

from __future__ import annotations

from fleet.spec import FleetSpec, ProviderSettings
from providers.registry import register_cloud_adapter, require_sdk

require_sdk("httpx")          # fail early, naming the extra; httpx is imported when a client is made

from providers.vast.check import check  # noqa: E402
from providers.vast.provider import VastProvider  # noqa: E402


def build(spec: FleetSpec, settings: ProviderSettings) -> VastProvider:
    """The adapter for ``spec`` (its $/GPU-h cap also caps bids)."""
    return VastProvider(settings, max_per_gpu_hour=spec.budget.max_per_gpu_hour)


register_cloud_adapter("vast", build, check=check)

__all__ = ["VastProvider", "build"]
