"""Live Azure prices from the public Retail Prices API, cached on disk, for the offers.

``GET https://prices.azure.com/api/retail/prices?$filter=...`` needs no credential and pages
through ``NextPageLink``. One query per region asks for the VM sizes wanted there (in chunks),
Consumption prices only. :func:`parse_items` keeps Linux meters: a ``productName`` ending in
``Windows`` and ``Low Priority`` meters are skipped, a ``Spot`` meter is the spot price and the
rest the on-demand price. Answers are kept in ``cache_path`` (JSON, per region, with the sizes
asked) for ``ttl_seconds``. ``$SPOTFLEET_AZURE_PRICES_URL`` points it elsewhere (the test fake).
Any failure raises ProviderError; the provider then prices from the snapshot.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from fleet.errors import ProviderError, TransientProviderError
from fleet.home import spotfleet_home
from fleet.model import Market

PRICES_URL_ENV = "SPOTFLEET_AZURE_PRICES_URL"
DEFAULT_URL = "https://prices.azure.com/api/retail/prices"
API_VERSION = "2023-01-01-preview"
SIZES_PER_QUERY = 10
MAX_PAGES = 200

#: (region, size in lower case, market) -> USD per hour
PriceTable = dict[tuple[str, str, Market], float]


def parse_items(items: Iterable[Mapping[str, Any]]) -> PriceTable:
    """Linux hourly prices from Retail Prices items (the cheapest when a size has several meters)."""
    out: PriceTable = {}
    for item in items:
        product, meter = str(item.get("productName") or ""), str(item.get("meterName") or "")
        sku = str(item.get("skuName") or "")
        if product.endswith("Windows") or "Low Priority" in meter or "Low Priority" in sku:
            continue
        if item.get("type") not in (None, "Consumption") or item.get("unitOfMeasure") not in (None, "1 Hour"):
            continue
        try:
            price = float(item["retailPrice"])
            key = (
                str(item["armRegionName"]).lower(),
                str(item["armSkuName"]).lower(),
                Market.SPOT if ("Spot" in meter or "Spot" in sku) else Market.ON_DEMAND,
            )
        except (KeyError, TypeError, ValueError):
            continue
        if price > 0 and (key not in out or price < out[key]):
            out[key] = price
    return out


def price_filter(region: str, sizes: Iterable[str]) -> str:
    names = " or ".join(f"armSkuName eq '{s}'" for s in sorted(sizes))
    return (
        f"serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and armRegionName eq '{region}' "
        f"and ({names})"
    )


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=15) as resp:  # noqa: S310  (https or a test fake)
        return json.loads(resp.read())


class RetailPrices:
    """Prices for (region, sizes), from the cache when fresh, else from the API."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        cache_path: Path | None = None,
        ttl_seconds: float = 6 * 3600,
        get_json: Callable[[str], Any] = _get_json,
    ):
        self.url = url
        self.cache_path = cache_path
        self.ttl_seconds = ttl_seconds
        self._get_json = get_json

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> RetailPrices:
        home = spotfleet_home(environ)
        return cls(environ.get(PRICES_URL_ENV) or DEFAULT_URL, home / "cache" / "azure_prices.json")

    def prices(self, wanted: Mapping[str, set[str]]) -> tuple[PriceTable, float]:
        """Prices for each region's sizes, and the oldest fetch time among them."""
        cache = self._load()
        now = time.time()
        changed = False
        for region, sizes in sorted(wanted.items()):
            entry = cache.get(region)
            if entry and now - entry["fetched_at"] < self.ttl_seconds and set(sizes) <= set(entry["sizes"]):
                continue
            items: list[dict[str, Any]] = []
            ordered = sorted(sizes)
            for i in range(0, len(ordered), SIZES_PER_QUERY):
                items.extend(self._fetch(price_filter(region, ordered[i : i + SIZES_PER_QUERY])))
            table = parse_items(items)
            cache[region] = {
                "fetched_at": now,
                "sizes": ordered,
                "prices": [[size, market.value, price] for (_, size, market), price in table.items()],
            }
            changed = True
        if changed:
            self._save(cache)
        out: PriceTable = {}
        oldest = now
        for region in wanted:
            entry = cache[region]
            oldest = min(oldest, entry["fetched_at"])
            for size, market, price in entry["prices"]:
                out[(region, size, Market(market))] = float(price)
        return out, oldest

    def _fetch(self, flt: str) -> list[dict[str, Any]]:
        url: str | None = f"{self.url}?" + urllib.parse.urlencode({"api-version": API_VERSION, "$filter": flt})
        items: list[dict[str, Any]] = []
        for _ in range(MAX_PAGES):
            if not url:
                return items
            try:
                page = self._get_json(url)
            except urllib.error.HTTPError as err:
                cls = TransientProviderError if err.code >= 500 or err.code == 429 else ProviderError
                raise cls("azure", f"retail prices: HTTP {err.code}", code=f"HTTP{err.code}") from err
            except (OSError, ValueError) as err:
                raise TransientProviderError("azure", f"retail prices: {err}", code="prices-unreachable") from err
            items.extend(page.get("Items") or [])
            url = page.get("NextPageLink")
        raise ProviderError("azure", "retail prices: paging did not end", code="paging")

    def _load(self) -> dict[str, Any]:
        if self.cache_path is None or not self.cache_path.exists():
            return {}
        try:
            data = json.loads(self.cache_path.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _save(self, cache: dict[str, Any]) -> None:
        if self.cache_path is None:
            return
        try:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(cache))
            os.replace(tmp, self.cache_path)
        except OSError:
            pass  # a cache we cannot write only costs a refetch
