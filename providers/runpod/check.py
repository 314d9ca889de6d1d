"""``fleet check runpod``: is there a key, does RunPod accept it, can GPU types be priced?

Two calls: the GPU catalog (``can_price``) and the pod listing (``can_launch``: it needs the
key). RunPod's API states no per-account GPU quota (its limit is the balance, which a create
refuses with ``402``), so none are reported. The key itself is never part of the result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.errors import AuthError, ProviderError
from providers.base import CheckResult
from providers.runpod.api import client
from providers.runpod.schemas import GpuList, PodList

if TYPE_CHECKING:
    from providers.kit.http import JsonClient

FIX_KEY = (
    "set $RUNPOD_API_KEY (or run `runpod config`, which writes ~/.runpod/config.toml); "
    "keys: https://www.runpod.io/console/user/settings"
)


def check(settings: object, api: JsonClient | None = None) -> CheckResult:
    """One CheckResult for RunPod (``settings`` are not needed: the checks are account-wide)."""
    api = api or client()
    where = f"at {api.url}"
    if not api.has_auth:
        return CheckResult(
            provider="runpod",
            ok=False,
            configured=False,
            can_price=False,
            can_launch=False,
            detail=f"no API key {where}",
            fix=FIX_KEY,
        )
    try:
        gpus = api.request("GET", "/v2/catalog/gpus", idempotent=True, what="list GPU types", schema=GpuList).gpus
        can_price: bool | None = True
        price_detail = f"{len(gpus)} GPU types priced"
    except AuthError as err:
        return CheckResult(
            provider="runpod",
            ok=False,
            can_price=False,
            can_launch=False,
            detail=f"the API key was refused {where}: {err.message}",
            fix=FIX_KEY,
        )
    except ProviderError as err:
        can_price, price_detail = False, f"the GPU catalog failed: {err}"
    try:
        pods = api.request("GET", "/v2/pods", idempotent=True, what="list pods", schema=PodList).pods
    except AuthError as err:
        return CheckResult(
            provider="runpod",
            ok=False,
            can_price=can_price,
            can_launch=False,
            detail=f"the API key was refused {where}: {err.message}",
            fix=FIX_KEY,
        )
    except ProviderError as err:
        return CheckResult(
            provider="runpod",
            ok=False,
            can_price=can_price,
            can_launch=None,
            detail=f"could not list pods {where}: {err}",
            fix="check the network and SPOTFLEET_RUNPOD_URL, then run `fleet check runpod` again",
        )
    ok = bool(can_price)
    return CheckResult(
        provider="runpod",
        ok=ok,
        identity="API key accepted",
        can_price=can_price,
        can_launch=True,
        quotas={"pods": f"{len(pods)} in the account"},
        detail=f"{price_detail} {where}",
        fix="" if ok else "the GPU catalog failed; check SPOTFLEET_RUNPOD_URL and try again",
    )
