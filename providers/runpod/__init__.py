"""The RunPod adapter (``pip install 'spotfleet[runpod]'``): on-demand pods over REST API v2 (httpx).

``$SPOTFLEET_RUNPOD_URL`` points it at another server (default https://api.runpod.io); the key
comes from ``$RUNPOD_API_KEY`` or ``~/.runpod/config.toml``. RunPod's current API sells no
interruptible pods, so RunPod is an on-demand floor for the planner and a no-notice provider.

This file is the provider's registration record and nothing else (every spec reads the records).
"""

from __future__ import annotations

from providers.kit.record import ProviderRecord, on_call
from providers.runpod.settings import RunPodSettings

RECORD = ProviderRecord(
    "runpod",
    title="RunPod",
    settings=RunPodSettings,
    factory=on_call("providers.runpod.provider:from_spec"),
    check=on_call("providers.runpod.check:check"),
    extra="runpod",
    sdk_modules=("httpx",),
    notice_seconds=0,
    spot=False,
    zones=True,
    checkpoint_scheme="file",
    agent_cloud="",
    pulumi_refusal="RunPod has no Pulumi provider the stacks use; launch RunPod pods with `fleet up`",
    summary="RunPod on-demand pods (Secure and Community clouds); its API v2 sells no interruptible pods",
)
