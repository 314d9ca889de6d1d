"""Where vendor API keys and endpoints are found on this machine (ground layer: both the adapters
and the node agent read them, and neither may import the other).

Vast.ai: base URL ``$SPOTFLEET_VAST_URL`` or ``https://console.vast.ai``; key ``$VAST_API_KEY``,
the official client's ``~/.config/vastai/vast_api_key``, or the in-container ``$CONTAINER_API_KEY``.
"""

from __future__ import annotations

import os
from pathlib import Path

VAST_DEFAULT_URL = "https://console.vast.ai"


def vast_url() -> str:
    """The Vast API base URL (``$SPOTFLEET_VAST_URL`` points it at another server)."""
    return os.environ.get("SPOTFLEET_VAST_URL") or VAST_DEFAULT_URL


def vast_api_key() -> str:
    """The Vast API key from the environment or the official client's key file ("" if none)."""
    key = os.environ.get("VAST_API_KEY", "")
    if not key:
        path = Path.home() / ".config" / "vastai" / "vast_api_key"
        if path.is_file():
            key = path.read_text().strip()
    return key or os.environ.get("CONTAINER_API_KEY", "")
