"""The RunPod REST API v2 client: the kit's ``JsonClient`` with RunPod's URL, key and rules.

``client(url, key)`` talks to ``$SPOTFLEET_RUNPOD_URL`` or ``https://api.runpod.io`` over
httpx. Why REST v2 and not the ``runpod`` SDK: the SDK (1.12) speaks only the GraphQL API,
whose interruptible mutation is being removed, while REST v1 stopped serving on 2026-11-15 and
v2 (``/v2/pods``, ``/v2/catalog/gpus``) is its documented successor. Retries, error mapping
(``providers.runpod.errors``), strict parsing and keeping the key out of every message are the
kit's (``providers.kit.http``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import tomllib

from fleet.errors import AuthError
from fleet.safetext import register_secret
from providers.kit.retry import RetryRules
from providers.runpod.errors import RULES, to_error

if TYPE_CHECKING:
    from providers.kit.http import JsonClient

DEFAULT_URL = "https://api.runpod.io"


def default_url() -> str:
    return os.environ.get("SPOTFLEET_RUNPOD_URL") or DEFAULT_URL


def find_api_key(environ: Mapping[str, str] | None = None, home: Path | None = None) -> str:
    """``$RUNPOD_API_KEY``, else the official client's ``~/.runpod/config.toml`` ``[default]
    api_key`` ("" when neither; an unreadable file counts as none)."""
    env = os.environ if environ is None else environ
    if env.get("RUNPOD_API_KEY"):
        return env["RUNPOD_API_KEY"]
    path = (home or Path.home()) / ".runpod" / "config.toml"
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    section = data.get("default")
    key = section.get("api_key") if isinstance(section, dict) else None
    return key if isinstance(key, str) else ""


def client(
    url: str | None = None,
    api_key: str | None = None,
    *,
    rules: RetryRules = RULES,
    sleep: Callable[[float], None] = time.sleep,
) -> JsonClient:
    """A client for one RunPod account (the key from :func:`find_api_key` unless given)."""
    from providers.kit.http import JsonClient

    key = api_key if api_key is not None else find_api_key()
    register_secret(key)  # the bare key too: a gateway may echo it without "Bearer"
    return JsonClient(
        "runpod",
        url or default_url(),
        rules=rules,
        to_error=to_error,
        sleep=sleep,
        auth_headers={"Authorization": f"Bearer {key}"} if key else {},
        missing_auth=lambda: AuthError(
            "runpod",
            "no API key: set $RUNPOD_API_KEY or run `runpod config` (~/.runpod/config.toml)",
            code="no-api-key",
        ),
    )
