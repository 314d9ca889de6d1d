"""What EC2 bills for the fleet's instances (``providers.aws.billing``), against moto behind the
EC2 proxy: the spot price of the instance's zone and type in effect at launch
(DescribeSpotPriceHistory), the catalog's list price for on-demand, unreadable answers refused."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

import aws_world  # noqa: E402

from fleet.catalog import on_demand_reference  # noqa: E402
from fleet.errors import ProviderError  # noqa: E402
from fleet.model import Instance, InstanceState, Market, PoolKey  # noqa: E402
from providers.aws.settings import AwsSettings  # noqa: E402
from providers.base import ReadsBilledRate  # noqa: E402


@pytest.fixture
def world(aws_moto):
    return aws_moto


def _provider():
    from providers.aws.provider import AwsProvider

    return AwsProvider(AwsSettings(regions=["us-east-1"]))


ZONE_NAMES = {"use1-az1": "us-east-1b", "use1-az2": "us-east-1c"}  # on moto


def _instance(world, zone: str, market: Market, itype: str = "g4dn.xlarge", price: float = 0.2) -> Instance:
    """One instance running in moto, as the adapter reports it."""
    ec2 = world.direct("ec2", "us-east-1")
    iid = ec2.run_instances(
        ImageId=aws_world.MOTO_AMI,
        InstanceType=itype,
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": ZONE_NAMES[zone]},
    )["Instances"][0]["InstanceId"]
    pool = PoolKey(provider="aws", region="us-east-1", zone=zone, instance_type=itype, market=market)
    return Instance(
        id=iid,
        fleet="alpha",
        pool=pool,
        state=InstanceState.RUNNING,
        accelerator="T4",
        gpus=1,
        price_per_hour=price,
        launched_at=time.time() - 60,
    )


def test_spot_bills_its_zones_price_at_launch_and_on_demand_its_list_price(world):
    provider = _provider()
    assert isinstance(provider, ReadsBilledRate)
    world.proxy.prices({"g4dn.xlarge us-east-1b": 0.31, "g4dn.xlarge us-east-1c": 0.25})  # moved since the plan
    spot_b = _instance(world, "use1-az1", Market.SPOT)
    spot_c = _instance(world, "use1-az2", Market.SPOT)
    od = _instance(world, "use1-az1", Market.ON_DEMAND, price=0.526)
    gone = _instance(world, "use1-az1", Market.ON_DEMAND)
    world.direct("ec2", "us-east-1").terminate_instances(InstanceIds=[gone.id])
    rates = provider.billed_rates([spot_b, spot_c, od, gone])
    listed = on_demand_reference([od.pool.id])[od.pool.id]
    assert {k: (r.per_hour, r.source, r.rental) for k, r in rates.items()} == {
        spot_b.id: (0.31, "spot-history", "spot"),
        spot_c.id: (0.25, "spot-history", "spot"),
        od.id: (listed, "list", "on-demand"),
    }  # gone: left out
    calls = world.proxy.stats()
    assert calls.get("DescribeSpotPriceHistory", 0) == 1  # one call per region


def test_a_type_without_history_is_left_out_not_priced(world):
    rates = _provider().billed_rates([_instance(world, "use1-az1", Market.SPOT, itype="p3.2xlarge")])
    assert rates == {}


@pytest.mark.parametrize("variant", ["truncated", "html"])
def test_an_unreadable_history_is_an_error_never_a_rate(world, variant):
    world.proxy.malformed(variant, 10, action="DescribeSpotPriceHistory")
    with pytest.raises(ProviderError):
        _provider().billed_rates([_instance(world, "use1-az1", Market.SPOT)])


def test_an_entry_without_a_readable_price_is_malformed():
    from fleet.errors import MalformedResponseError
    from providers.aws.billing import _entry

    for row in (
        {
            "InstanceType": "g4dn.xlarge",
            "AvailabilityZone": "us-east-1b",
            "ProductDescription": "Linux/UNIX",
            "Timestamp": 1.0,
        },
        {
            "InstanceType": "g4dn.xlarge",
            "AvailabilityZone": "us-east-1b",
            "ProductDescription": "Linux/UNIX",
            "Timestamp": 1.0,
            "SpotPrice": "n/a",
        },
    ):
        with pytest.raises(MalformedResponseError):
            _entry(row, "us-east-1")


def test_the_price_in_effect_at_launch_is_the_newest_entry_not_after_it():
    from providers.aws.billing import _at

    history = [(100.0, 0.3), (200.0, 0.4), (300.0, 0.9)]
    assert (_at(history, 250.0), _at(history, 200.0), _at(history, 50.0), _at(history, 999.0)) == (0.4, 0.4, 0.3, 0.9)
