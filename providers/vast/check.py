"""``fleet check vast``: is there a key, does Vast accept it, can offers be searched?

Search needs no key (``can_price``); an authenticated instance listing proves the key
(``can_launch``): Vast has no per-account GPU quotas, its only limit is the credit balance.
The key itself is never part of the result.
"""

from __future__ import annotations

from fleet.errors import AuthError, ProviderError
from fleet.model import Market
from providers.base import CheckResult
from providers.vast.api import VastApi
from providers.vast.offers import search_body
from providers.vast.schemas import InstancePage, OfferPage
from providers.vast.settings import VastSettings

FIX_KEY = "set $VAST_API_KEY (or write the key to ~/.config/vastai/vast_api_key); keys: https://cloud.vast.ai/account/"


def check(settings: VastSettings, api: VastApi | None = None) -> CheckResult:
    """One CheckResult for Vast with ``settings`` (two calls: a search and a one-row listing)."""
    api = api or VastApi(retry_delays=(0.5, 1.0))
    where = f"at {api.url}"
    try:
        body = {**search_body(Market.SPOT, (), settings), "limit": 1}
        api.request(
            "POST", "/api/v0/bundles/", body=body, auth=False, idempotent=True, what="search offers", schema=OfferPage
        )
        can_price: bool | None = True
        price_detail = ""
    except ProviderError as err:
        can_price, price_detail = False, f"search failed: {err}"
    if not api.has_key:
        return CheckResult(
            provider="vast",
            ok=False,
            configured=False,
            can_price=can_price,
            can_launch=False,
            detail=f"no API key {where}" + (f"; {price_detail}" if price_detail else ""),
            fix=FIX_KEY,
        )
    try:
        data = api.request(
            "GET",
            "/api/v1/instances/",
            params={"select_filters": {}, "limit": 1},
            idempotent=True,
            what="list instances",
            schema=InstancePage,
        )
    except AuthError as err:
        return CheckResult(
            provider="vast",
            ok=False,
            can_price=can_price,
            can_launch=False,
            detail=f"the API key was refused {where}: {err.message}",
            fix=FIX_KEY,
        )
    except ProviderError as err:
        return CheckResult(
            provider="vast",
            ok=False,
            can_price=can_price,
            can_launch=None,
            detail=f"could not list instances {where}: {err}",
            fix="check the network and SPOTFLEET_VAST_URL, then run `fleet check vast` again",
        )
    total = data.total_instances
    quotas = {"instances": f"{total} in the account"} if total is not None else {}
    ok = bool(can_price)
    return CheckResult(
        provider="vast",
        ok=ok,
        identity="API key accepted",
        can_price=can_price,
        can_launch=True,
        quotas=quotas,
        detail=price_detail or where,
        fix="" if ok else "the offer search failed; check SPOTFLEET_VAST_URL and try again",
    )
