"""What Azure bills (``providers.azure.billing``) against the fake Retail Prices API
(``tests/fakes/azure_prices_server.py``): the exact size and region's Linux Spot or on-demand
consumption row across pages, nothing for a size it does not list, and unreadable answers as errors."""

from __future__ import annotations

import httpx
import pytest

from fleet.errors import MalformedResponseError, ProviderError
from fleet.model import Instance, InstanceState, Market, PoolKey
from providers.azure.billing import RetailBills, billed_rates
from providers.azure.settings import AzureSettings
from tests.fakes.azure_prices_server import AzurePricesServer

SIZE = "Standard_NC24ads_A100_v4"


@pytest.fixture(scope="module")
def fake():
    srv = AzurePricesServer(port=0).start()
    yield srv
    srv.stop()


@pytest.fixture
def bills(fake):
    httpx.post(f"{fake.url}/_control/reset", json={}).raise_for_status()
    return RetailBills(f"{fake.url}/api/retail/prices", sleep=lambda s: None)


def _inst(iid: str, market: Market, region: str = "eastus", size: str = SIZE) -> Instance:
    return Instance(
        id=iid,
        fleet="az",
        pool=PoolKey(provider="azure", region=region, zone="", instance_type=size, market=market),
        accelerator="A100",
        gpus=1,
        state=InstanceState.RUNNING,
        price_per_hour=0.0,
        launched_at=0.0,
    )


def test_the_setting_defaults_to_the_public_endpoint():
    assert AzureSettings().prices_url == "https://prices.azure.com/api/retail/prices"


def test_the_linux_spot_and_on_demand_rows_of_the_exact_size_and_region_across_pages(bills, fake):
    # the fake lists 6 rows for the size in eastus (Linux/Windows x on-demand/Spot/Low Priority), 2 a page
    assert bills.rate("eastus", SIZE, Market.SPOT) == 0.42
    assert bills.rate("eastus", SIZE, Market.ON_DEMAND) == 3.5
    assert httpx.post(f"{fake.url}/_control/calls").json()["calls"] == 6  # 3 pages each
    rates = billed_rates(
        bills, [_inst("a", Market.SPOT), _inst("b", Market.ON_DEMAND), _inst("c", Market.SPOT)], now=100.0
    )
    assert {k: (r.per_hour, r.source, r.rental, r.at) for k, r in rates.items()} == {
        "a": (0.42, "price-api", "spot", 100.0),
        "b": (3.5, "price-api", "on-demand", 100.0),
        "c": (0.42, "price-api", "spot", 100.0),
    }


def test_a_size_or_region_it_does_not_list_is_left_out(bills):
    assert bills.rate("eastus", "Standard_NC24ads_A100_v5", Market.SPOT) is None
    assert billed_rates(bills, [_inst("a", Market.SPOT, region="antarctica")], now=0.0) == {}


def test_the_newest_row_wins_and_windows_and_low_priority_rows_never_do(bills, fake):
    row = {
        "retailPrice": 1.0,
        "unitPrice": 1.0,
        "armSkuName": SIZE,
        "armRegionName": "eastus",
        "skuName": "X Spot",
        "meterName": "X Spot",
        "productName": "Virtual Machines X Series",
        "serviceName": "Virtual Machines",
        "type": "Consumption",
        "unitOfMeasure": "1 Hour",
        "effectiveStartDate": "2025-01-01T00:00:00Z",
    }
    items = [
        row,
        {**row, "retailPrice": 1.2, "effectiveStartDate": "2026-06-01T00:00:00Z"},
        {
            **row,
            "retailPrice": 0.1,
            "productName": "Virtual Machines X Series Windows",
            "effectiveStartDate": "2027-01-01T00:00:00Z",
        },
        {**row, "retailPrice": 0.05, "skuName": "X Low Priority", "meterName": "X Low Priority"},
    ]
    httpx.post(f"{fake.url}/_control/reset", json={"items": items}).raise_for_status()
    assert bills.rate("eastus", SIZE, Market.SPOT) == 1.2
    assert bills.rate("eastus", SIZE, Market.ON_DEMAND) is None


@pytest.mark.parametrize("variant", ["truncated", "html", "empty", "wrong-types"])
def test_an_unreadable_answer_is_an_error_never_no_price(bills, fake, variant):
    httpx.post(f"{fake.url}/_control/faults", json={"variant": variant, "count": 1}).raise_for_status()
    with pytest.raises(MalformedResponseError):
        bills.rate("eastus", SIZE, Market.SPOT)


def test_an_item_without_a_price_is_malformed(bills, fake):
    httpx.post(
        f"{fake.url}/_control/reset",
        json={
            "items": [
                {
                    "armSkuName": SIZE,
                    "armRegionName": "eastus",
                    "skuName": "X",
                    "productName": "X",
                    "serviceName": "Virtual Machines",
                    "type": "Consumption",
                }
            ]
        },
    )
    with pytest.raises(MalformedResponseError):
        bills.rate("eastus", SIZE, Market.ON_DEMAND)


def test_the_fake_refuses_an_unknown_filter_field_with_400_as_the_api_does(fake):
    resp = httpx.get(f"{fake.url}/api/retail/prices", params={"$filter": "colour eq 'blue'"})
    assert resp.status_code == 400 and resp.json()["Error"]["Code"] == "BadRequest"


def test_a_refusal_is_a_provider_error_naming_the_query(fake):
    bills = RetailBills(f"{fake.url}/api/retail/nothing", sleep=lambda s: None)
    with pytest.raises(ProviderError, match="retail prices of .* in eastus") as err:
        bills.rate("eastus", SIZE, Market.SPOT)
    assert not isinstance(err.value, MalformedResponseError)
