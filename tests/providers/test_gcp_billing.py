"""What GCE bills (``providers.gcp.billing``) against the fake Compute Engine and its Cloud Billing
Catalog (``tests/fakes/gce_server.py``): each VM's rate composed from its machine type's core,
RAM and GPU SKUs across pages, gone VMs left out, unreadable catalog answers as errors."""

from __future__ import annotations

import pytest

from fleet.errors import MalformedResponseError
from fleet.model import LaunchRequest, Market, NodeConfig, fleet_tags
from providers.base import OfferQuery
from providers.gcp.billing import CatalogBills
from providers.gcp.provider import GceApi, GcpProvider
from providers.gcp.settings import GcpSettings
from tests.fakes.gce_server import GceServer, control


@pytest.fixture(scope="module")
def server():
    srv = GceServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def gcp(server) -> GcpProvider:
    control(server.url, "reset", {})
    provider = GcpProvider(
        "proj",
        api=GceApi("proj", endpoint=server.url, retry_delays=(0.01, 0.02)),
        settings=GcpSettings(billing_url=server.url),
    )
    provider.bills = CatalogBills(server.url, page_size=3, sleep=lambda s: None)  # several pages
    return provider


def _launch(gcp: GcpProvider, instance_type: str, market: Market, token: str):
    offer = next(
        o for o in gcp.list_offers(OfferQuery()) if o.pool.instance_type == instance_type and o.market is market
    )
    request = LaunchRequest(
        fleet="gb", offer=offer, count=1, token=token, tags=fleet_tags("gb", offer.pool, "p"), node=NodeConfig()
    )
    return gcp.launch(request).instances[0]


def test_the_setting_defaults_to_the_public_catalog():
    assert GcpSettings().billing_url == "https://cloudbilling.googleapis.com"


def test_rates_are_composed_from_the_machine_types_core_ram_and_gpu_skus(gcp, server):
    t4 = _launch(gcp, "n1-standard-4+nvidia-tesla-t4x1", Market.SPOT, "tok-b1")
    a3 = _launch(gcp, "a3-highgpu-8g", Market.ON_DEMAND, "tok-b2")
    rates = gcp.billed_rates([t4, a3])
    # the fake catalog's Spot N1 core/RAM and T4 rates; n1-standard-4 is 4 vCPUs and 15 GiB
    assert rates[t4.id].per_hour == pytest.approx(4 * 0.00663 + 15 * 0.000889 + 0.14, abs=1e-5)
    assert rates[a3.id].per_hour == pytest.approx(208 * 0.0291 + 1872 * 0.0039 + 8 * 9.79629, abs=1e-4)
    assert {(r.source, r.rental) for r in rates.values()} == {("price-api", "spot"), ("price-api", "on-demand")}
    gcp.terminate([t4.id])
    assert set(gcp.billed_rates([t4, a3])) == {a3.id}
    assert gcp.billed_rates([]) == {}


@pytest.mark.parametrize("variant", ["truncated", "html", "empty", "wrong-types"])
def test_an_unreadable_catalog_is_an_error_never_no_price(gcp, server, variant):
    vm = _launch(gcp, "g2-standard-4", Market.SPOT, f"tok-m-{variant}")
    control(server.url, "malformed", {"variant": variant, "call": "billing.skus", "count": 1})
    with pytest.raises(MalformedResponseError):
        gcp.billed_rates([vm])
