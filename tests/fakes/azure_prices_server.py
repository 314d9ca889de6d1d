"""A local fake of the Azure Retail Prices API, written from the vendor's public documentation.

Source (read 2026-12-02): "Azure Retail Prices overview",
https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices
(unauthenticated ``GET https://prices.azure.com/api/retail/prices?api-version=2023-01-01-preview``;
OData ``$filter`` on the item fields with ``eq`` and ``and``, values case-sensitive in
2023-01-01-preview; answers ``{"BillingCurrency", "CustomerEntityId", "CustomerEntityType",
"Items", "NextPageLink", "Count"}``; paging: ``NextPageLink`` is the next page's full URL, with
``$skip``, and ``null`` on the last page; items carry ``currencyCode``, ``retailPrice``,
``unitPrice``, ``armRegionName``, ``location``, ``meterName``, ``skuName``, ``productName``
(``... Series Windows`` for Windows), ``armSkuName``, ``serviceName``, ``unitOfMeasure``,
``type`` (``Consumption``, ``Reservation``, ``DevTestConsumption``), ``effectiveStartDate``).
Spot rows have ``Spot`` in ``skuName``/``meterName``; ``Low Priority`` rows exist too.
A filter naming a field the API does not know is refused with HTTP 400 (the service's
``{"Error": {"Code": "BadRequest", "Message": "Invalid OData parameters supplied"}}``).

Runs on its own (``python tests/fakes/azure_prices_server.py --port 8795``) or in a test
(``AzurePricesServer(port=0).start()``); answers ``GET /api/retail/prices``. The items are those
of ``tests/fakes/azure_arm.py`` (:func:`price_items`: Linux/Windows x on-demand/Spot/Low Priority,
per region) unless ``POST /_control/reset`` gives ``{"items": [...]}`` or ``{"prices": {size:
[on-demand, spot]}, "regions": [...]}``; ``page_size`` (default 2) forces paging. Other levers under
``/_control/``: ``faults`` (``{"variant": truncated|html|empty|wrong-types, "count": n}``: the next
n price answers are that malformed 200, ``tests/fakes/malformed.py``), ``calls`` (requests served).
"""

from __future__ import annotations

import re
import threading
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

try:
    import malformed
    from azure_arm import DEFAULT_PRICES, price_items
    from serving import BackgroundServer, JsonHandler, serve_main
except ImportError:  # imported as tests.fakes.azure_prices_server
    from . import malformed
    from .azure_arm import DEFAULT_PRICES, price_items
    from .serving import BackgroundServer, JsonHandler, serve_main

#: The item fields a ``$filter`` may name (the documented response fields).
FIELDS = {
    "currencyCode",
    "tierMinimumUnits",
    "retailPrice",
    "unitPrice",
    "armRegionName",
    "location",
    "effectiveStartDate",
    "meterId",
    "meterName",
    "productId",
    "skuId",
    "productName",
    "skuName",
    "serviceName",
    "serviceId",
    "serviceFamily",
    "unitOfMeasure",
    "type",
    "priceType",
    "isPrimaryMeterRegion",
    "armSkuName",
    "reservationTerm",
}
DEFAULT_REGIONS = ("eastus", "westeurope")
CLAUSE = re.compile(r"^\(?\s*(\w+)\s+eq\s+'([^']*)'\s*\)?$")
WRONG_TYPES = b'{"Items": {"retailPrice": "cheap"}, "NextPageLink": 7}'


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset({})

    def reset(self, body: dict[str, Any]) -> None:
        if "items" in body:
            self.items = list(body["items"])
        else:
            table = {k: tuple(v) for k, v in (body.get("prices") or DEFAULT_PRICES).items()}
            regions = list(body.get("regions") or DEFAULT_REGIONS)
            self.items = price_items([{"name": n, "locations": regions} for n in table], table)
            for item in self.items:
                item.setdefault("effectiveStartDate", "2026-01-01T00:00:00Z")
        self.page_size = int(body.get("page_size") or 2)
        self.faults: list[dict[str, Any]] = []
        self.calls = 0


def parse_filter(flt: str) -> list[list[tuple[str, str]]]:
    """``a eq 'x' and (b eq 'y' or b eq 'z')`` -> [[(a, x)], [(b, y), (b, z)]]: every group must
    match one of its clauses. ValueError naming an unknown field or a clause it cannot read."""
    groups = []
    for part in re.split(r"\s+and\s+", flt.strip()) if flt.strip() else []:
        options = []
        for clause in re.split(r"\s+or\s+", part.strip().strip("()")):
            m = CLAUSE.match(clause.strip())
            if not m:
                raise ValueError(f"cannot read clause {clause!r}")
            if m.group(1) not in FIELDS:
                raise ValueError(f"unknown field {m.group(1)!r}")
            options.append((m.group(1), m.group(2)))
        groups.append(options)
    return groups


def _matches(item: dict[str, Any], groups: list[list[tuple[str, str]]]) -> bool:
    def value(field: str) -> str:
        return str(item.get("type") if field == "priceType" else item.get(field))

    return all(any(value(f) == v for f, v in options) for options in groups)


class Handler(JsonHandler):
    server_version = "FakeAzureRetailPrices/1.0"
    WRONG_TYPES = {"prices": WRONG_TYPES}
    state: State

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        if parts[:1] == ["_control"] and method == "POST":
            return self._control(parts[1:], self._body() or {})
        if method == "GET" and parts == ["api", "retail", "prices"]:
            return self._prices(url.query)
        return self._send(404, {"Error": {"Code": "NotFound", "Message": f"no route {url.path}"}})

    def _prices(self, query: str) -> None:
        params = parse_qs(query)
        flt = (params.get("$filter") or [""])[0]
        try:
            groups = parse_filter(flt)
            skip = int((params.get("$skip") or ["0"])[0])
        except ValueError:
            return self._send(400, {"Error": {"Code": "BadRequest", "Message": "Invalid OData parameters supplied"}})
        with self.state.lock:
            self.state.calls += 1
            variant = malformed.take(self.state.faults, "prices")
            rows = [i for i in self.state.items if _matches(i, groups)]
            size = self.state.page_size
        page = rows[skip : skip + size]
        host, port = self.server.server_address[:2]
        nxt = None
        if skip + size < len(rows):
            keep = {k: v[0] for k, v in params.items() if k != "$skip"}
            nxt = f"http://{host}:{port}/api/retail/prices?" + urlencode({**keep, "$skip": skip + size})
        body = {
            "BillingCurrency": "USD",
            "CustomerEntityId": "Default",
            "CustomerEntityType": "Retail",
            "Items": page,
            "NextPageLink": nxt,
            "Count": len(page),
        }
        self._send(200, body, broken={"target": "prices", "variant": variant} if variant else None)

    def _control(self, parts: list[str], body: dict[str, Any]) -> None:
        with self.state.lock:
            if parts == ["reset"]:
                self.state.reset(body)
            elif parts == ["faults"]:
                self.state.faults.append(
                    {"target": "prices", "variant": body["variant"], "count": int(body.get("count", 1))}
                )
            elif parts != ["calls"]:
                return self._send(404, {"error": f"no control {'/'.join(parts)}"})
            return self._send(200, {"calls": self.state.calls})


class AzurePricesServer(BackgroundServer):
    """The fake on a background thread: ``url`` once started; ``state`` for in-process tests."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", latency: float = 0.0):
        super().__init__(Handler, State(), port, host)


def main() -> None:
    serve_main(AzurePricesServer, what="Azure Retail Prices API", port=8795, key="(none: unauthenticated)")


if __name__ == "__main__":
    main()
