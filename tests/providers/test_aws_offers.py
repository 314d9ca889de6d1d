"""AWS offers from the live APIs (moto behind the EC2 proxy, which also answers the Price List
API), keyed by zone ID, with the snapshot standing in for each part that fails, and a disk cache."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))


from fleet.catalog import Catalog  # noqa: E402
from fleet.model import InterruptionSource, Market  # noqa: E402
from providers.aws.settings import AwsSettings  # noqa: E402
from providers.base import OfferQuery  # noqa: E402

T4 = OfferQuery(accelerators=("T4",))


@pytest.fixture
def world(aws_moto):
    return aws_moto


def _provider(**settings):
    from providers.aws.provider import AwsProvider

    return AwsProvider(AwsSettings(regions=["us-east-1"], **settings))


def _by_pool(offers):
    return {o.pool.id: o for o in offers}


def test_live_prices_per_zone_id_with_on_demand_from_the_price_list(world):
    world.proxy.prices({"g4dn.xlarge us-east-1b": 0.2, "g4dn.xlarge us-east-1c": 0.25})
    world.proxy.on_demand_prices({"us-east-1 g4dn.xlarge": 0.526})
    offers = _by_pool(_provider().list_offers(T4))
    spot_b = offers["aws/us-east-1/use1-az1/g4dn.xlarge/spot"]  # us-east-1b is use1-az1 on moto
    assert spot_b.price_per_hour == 0.2 and spot_b.on_demand_price == 0.526 and spot_b.gpus == 1
    assert offers["aws/us-east-1/use1-az2/g4dn.xlarge/spot"].price_per_hour == 0.25
    od = offers["aws/us-east-1/use1-az1/g4dn.xlarge/on-demand"]
    assert od.price_per_hour == 0.526 and od.interruptions_per_hour == 0
    assert spot_b.interruption_source is InterruptionSource.PROVIDER_PRIOR  # no Spot Advisor behind an emulator
    assert {o.source for o in offers.values() if o.pool.instance_type == "g4dn.xlarge"} == {"live"}
    assert all(o.accelerator == "T4" for o in offers.values())


def test_a_failed_part_comes_from_the_snapshot_and_says_so(world):
    offers = _provider().list_offers(T4)  # moto has no Price List API: on-demand from the snapshot
    assert offers and {o.source for o in offers} == {"live (snapshot for on-demand prices)"}
    od = [o for o in offers if o.market is Market.ON_DEMAND and o.pool.instance_type == "g4dn.xlarge"]
    assert od and od[0].price_per_hour > 0.3
    _, info = Catalog(providers={"aws": _provider()}).offers(T4)
    assert "snapshot for on-demand prices" in info.detail and info.fallbacks == ()


def test_a_complete_answer_is_cached_on_disk_until_its_ttl(world):
    world.proxy.on_demand_prices({"us-east-1 g4dn.xlarge": 0.526})
    first = _provider().list_offers(T4)
    calls = dict(world.proxy.stats())
    again = _provider().list_offers(T4)  # a new process would see the same file
    assert again == first and world.proxy.stats() == calls
    from providers.aws.provider import AwsProvider

    refreshed = AwsProvider(AwsSettings(regions=["us-east-1"]), refresh_offers=True).list_offers(T4)
    assert (
        refreshed == first and world.proxy.stats()["DescribeSpotPriceHistory"] == calls["DescribeSpotPriceHistory"] + 1
    )


def test_zone_rules_of_the_spec_filter_live_offers(world):
    offers = _provider(zones=["use1-az1"]).list_offers(T4)
    assert offers and {o.pool.zone for o in offers} == {"use1-az1"}
