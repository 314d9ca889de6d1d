"""Acme's REST client: the kit's ``JsonClient`` with Acme's base URL, key and rules."""

from __future__ import annotations

import os

from fleet.errors import AuthError
from providers._template.errors import RULES, to_error
from providers.kit.http import JsonClient


def client(url: str | None = None, api_key: str | None = None) -> JsonClient:
    key = api_key if api_key is not None else os.environ.get("ACME_API_KEY", "")
    return JsonClient(
        "acme",
        url or os.environ.get("SPOTFLEET_ACME_URL", "https://api.acme.example"),
        rules=RULES,
        to_error=to_error,
        auth_headers={"Authorization": f"Bearer {key}"} if key else {},
        missing_auth=lambda: AuthError("acme", "no API key: set $ACME_API_KEY", code="no-api-key"),
    )
