"""The Vast.ai adapter (``pip install 'spotfleet[vast]'``): REST over httpx, registered as ``vast``.

``$SPOTFLEET_VAST_URL`` points it at another server (default https://console.vast.ai);
the key comes from ``$VAST_API_KEY`` or ``~/.config/vastai/vast_api_key``.
"""

from __future__ import annotations

from providers.kit.record import ProviderRecord, on_call
from providers.vast.settings import VastSettings

RECORD = ProviderRecord(
    "vast",
    title="Vast.ai",
    settings=VastSettings,
    factory=on_call("providers.vast.provider:from_spec"),
    check=on_call("providers.vast.check:check"),
    extra="vast",
    sdk_modules=("httpx",),
    notice_seconds=0,
    spot=True,
    zones=False,
    checkpoint_scheme="file",
    agent_cloud="vast",
    pulumi_stack="stacks.vast:VastFleet",
    summary="Vast.ai interruptible (bids) and on-demand instances",
)
