"""What Azure bills for the fleet's VMs, from the Retail Prices API (``providers.base.ReadsBilledRate``).

Azure has no per-VM rate in ARM. A VM is billed the consumption price of its size in its
region: the Spot meter for a Spot VM, the plain meter for an on-demand one, Linux (the
fleet's images are Linux). :class:`RetailBills` asks, per (region, size), exactly
``serviceName eq 'Virtual Machines' and armRegionName eq R and armSkuName eq S and priceType eq
'Consumption'`` and pages through ``NextPageLink`` (its query is sent to the configured
endpoint, never to a host the answer names). Of the items it keeps those for that exact size
and region, hourly, whose ``productName`` does not end in ``Windows`` and whose
``skuName``/``meterName`` do not say ``Low Priority``; ``Spot`` in either names the spot meter.
When several such rows are listed the newest ``effectiveStartDate`` wins. Source
``price-api``, rental ``spot``/``on-demand``. A size with no such row is left out (no guess).

An answer that is not JSON, lacks ``Items``, or has an item without a readable
``retailPrice``/``armSkuName``/``armRegionName``/``skuName``/``productName`` is
MalformedResponseError; a 4xx is ProviderError, a 5xx or 429 retried then raised.

API: https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices
(``api-version=2023-01-01-preview``; filter values are case-sensitive in that version).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field

from fleet.errors import ProviderError
from fleet.model import BilledRate, Instance, Market
from providers.kit.errors import ErrorTable
from providers.kit.http import JsonClient
from providers.kit.responses import check
from providers.kit.retry import RetryRules

DEFAULT_URL = "https://prices.azure.com/api/retail/prices"
API_VERSION = "2023-01-01-preview"
MAX_PAGES = 50
TABLE = ErrorTable("azure")
RULES = RetryRules(max_attempts=4, base_delay=0.5, max_delay=4.0, max_total_seconds=20.0)


class Item(BaseModel):
    model_config = ConfigDict(extra="allow")

    retailPrice: float = Field(ge=0, allow_inf_nan=False)  # noqa: N815  (the API's names)
    armSkuName: str  # noqa: N815
    armRegionName: str  # noqa: N815
    skuName: str  # noqa: N815
    productName: str  # noqa: N815
    meterName: str = ""  # noqa: N815
    type: str = "Consumption"
    unitOfMeasure: str = "1 Hour"  # noqa: N815
    effectiveStartDate: str = ""  # noqa: N815


class Page(BaseModel):
    model_config = ConfigDict(extra="allow")

    Items: list[Item]
    NextPageLink: str | None = None


def _to_error(status: int, body: Any, what: str, retry_after: float | None) -> ProviderError:
    err = body.get("Error") if isinstance(body, dict) else None
    code = str(err.get("Code") or "") if isinstance(err, dict) else ""
    msg = str(err.get("Message") or "") if isinstance(err, dict) else ""
    return TABLE.error(f"{what}: {msg or code or 'HTTP ' + str(status)}", status=status, retry_after=retry_after)


def rental_of(item: Item) -> Market | None:
    """The market a Linux consumption row prices, or None for a row a fleet VM is not billed at."""
    names = f"{item.skuName} {item.meterName}"
    if (
        item.productName.endswith("Windows")
        or "Low Priority" in names
        or item.type != "Consumption"
        or item.unitOfMeasure != "1 Hour"
    ):
        return None
    return Market.SPOT if "Spot" in names else Market.ON_DEMAND


class RetailBills:
    """The Retail Prices API at ``url`` (the provider's ``prices_url`` setting)."""

    def __init__(
        self, url: str = DEFAULT_URL, *, client: JsonClient | None = None, sleep: Callable[[float], None] | None = None
    ):
        self.url = url
        parts = urlsplit(url)
        kw = {"sleep": sleep} if sleep is not None else {}
        self._client = client or JsonClient(
            "azure", f"{parts.scheme}://{parts.netloc}", rules=RULES, to_error=_to_error, **kw
        )
        self._path = parts.path or "/"

    def rows(self, region: str, size: str) -> list[Item]:
        """Every item the API lists for ``size`` in ``region`` (consumption prices, all pages)."""
        params: dict[str, Any] = {
            "api-version": API_VERSION,
            "$filter": (
                f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' and armSkuName eq '{size}' "
                "and priceType eq 'Consumption'"
            ),
        }
        items: list[Item] = []
        what = f"retail prices of {size} in {region}"
        for _ in range(MAX_PAGES):
            data = self._client.request("GET", self._path, what=what, params=params, auth=False, idempotent=True)
            page = check(Page, data, provider="azure", what=what)
            items.extend(page.Items)
            if not page.NextPageLink:
                return items
            params = dict(parse_qsl(urlsplit(page.NextPageLink).query))
        raise ProviderError("azure", f"{what}: paging did not end after {MAX_PAGES} pages", code="paging")

    def rate(self, region: str, size: str, market: Market) -> float | None:
        """The hourly Linux ``market`` price of ``size`` in ``region`` (see the module doc), or None."""
        fitting = [
            i
            for i in self.rows(region, size)
            if i.armSkuName == size
            and i.armRegionName == region
            and rental_of(i) is market
            and math.isfinite(i.retailPrice)
        ]
        if not fitting:
            return None
        return max(fitting, key=lambda i: i.effectiveStartDate).retailPrice


def billed_rates(bills: RetailBills, alive: Sequence[Instance], now: float) -> dict[str, BilledRate]:
    """Instance id -> its billed rate, one API query per (region, size, market) among ``alive``."""
    out: dict[str, BilledRate] = {}
    asked: dict[tuple[str, str, Market], float | None] = {}
    for inst in alive:
        key = (inst.pool.region, inst.pool.instance_type, inst.pool.market)
        if key not in asked:
            asked[key] = bills.rate(*key)
        if asked[key] is not None:
            out[inst.id] = BilledRate(
                per_hour=float(asked[key]),
                source="price-api",
                rental="spot" if inst.pool.market is Market.SPOT else "on-demand",
                at=now,
            )
    return out
