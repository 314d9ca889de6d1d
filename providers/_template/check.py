"""``fleet check acme``: is there a key, and does Acme accept it (one listing call)."""

from __future__ import annotations

from fleet.errors import AuthError, ProviderError
from fleet.spec import ProviderSettings
from providers._template.api import client
from providers._template.schemas import InstanceList
from providers.base import CheckResult
from providers.kit.http import JsonClient

FIX = "set $ACME_API_KEY (keys: https://acme.example/account)"


def check(settings: ProviderSettings, api: JsonClient | None = None) -> CheckResult:
    api = api or client()
    if not api.has_auth:
        return CheckResult(provider="acme", ok=False, configured=False, detail="no API key", fix=FIX)
    try:
        api.request("GET", "/instances", idempotent=True, what="list instances", schema=InstanceList)
    except AuthError as err:
        return CheckResult(provider="acme", ok=False, can_launch=False, detail=f"key refused: {err.message}", fix=FIX)
    except ProviderError as err:
        return CheckResult(provider="acme", ok=False, detail=str(err), fix="check the network, then run again")
    return CheckResult(provider="acme", ok=True, identity="API key accepted", can_price=True, can_launch=True)
