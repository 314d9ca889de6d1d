"""Contract target ``aws``: the real AWS adapter and boto3, over HTTP, against moto behind the EC2 fault proxy.

The levers act on the world behind the adapter: capacity limits and faults are rules of the
proxy (answered with EC2's own error XML), someone else's instances are started straight on
moto, and what is alive is read straight from moto.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet.model import TAG_FLEET, Market, Offer
from providers.aws.settings import AwsSettings
from providers.base import OfferQuery, Provider

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

import aws_world  # noqa: E402

REGION = "us-east-1"


@dataclass
class AwsHarness:
    world: aws_world.AwsWorld
    provider: Provider

    def offer(self, market: Market) -> Offer | None:
        offers = sorted(
            (o for o in self.provider.list_offers(OfferQuery(regions=(REGION,))) if o.market is market),
            key=lambda o: o.pool.id,
        )
        return offers[0] if offers else None

    def _subnets(self, offer: Offer) -> tuple[str, ...]:
        return self.world.subnets(offer.pool.region, offer.pool.zone)

    def limit_capacity(self, offer: Offer, n: int) -> None:
        self.world.proxy.capacity(offer.pool.instance_type, n, self._subnets(offer))

    def inject(self, offer: Offer, kind: str, count: int) -> None:
        self.world.proxy.fault(offer.pool.instance_type, kind, count, self._subnets(offer))

    def foreign(self, offer: Offer, count: int) -> list[str]:
        got = self.world.direct("ec2", offer.pool.region).run_instances(
            ImageId=aws_world.MOTO_AMI,
            InstanceType=offer.pool.instance_type,
            MinCount=count,
            MaxCount=count,
            SubnetId=self._subnets(offer)[0],
        )
        return [i["InstanceId"] for i in got["Instances"]]

    def alive(self, ids: list[str]) -> set[str]:
        if not ids:
            return set()
        got = self.world.direct("ec2", REGION).describe_instances(
            Filters=[
                {"Name": "instance-id", "Values": ids},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )
        return {i["InstanceId"] for r in got["Reservations"] for i in r["Instances"]}

    def missing_id(self) -> str:
        return "i-0" + os.urandom(8).hex()

    def malform(self, variant: str, count: int) -> None:
        self.world.proxy.malformed(variant, count)

    def interconnect(self, offer: Offer, name: str) -> dict | None:
        """The cluster placement group ``name`` in the offer's region: the fleet its tag names as
        owner ("" for none) and the instances launched into it, ``None`` when there is none."""
        group = self.world.proxy.placement_groups().get(f"{offer.pool.region}/{name}")
        if group is None:
            return None
        return {"owner": group["tags"].get(TAG_FLEET, ""), "members": group["instances"]}

    def foreign_interconnect(self, offer: Offer, name: str) -> None:
        """A group named ``name`` that no fleet made (no fleet tag)."""
        import boto3  # moto has no placement groups: the proxy holds them

        boto3.client(
            "ec2",
            endpoint_url=self.world.proxy.url,
            region_name=offer.pool.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_placement_group(GroupName=name, Strategy="cluster")


def make(request: pytest.FixtureRequest, tmp_path: Path) -> AwsHarness:
    """A fresh moto world (reset) and an adapter pointed at it through the proxy."""
    world = aws_world.fresh()
    from providers.aws.provider import AwsProvider
    from providers.aws.session import Aws

    monkeypatch = request.getfixturevalue("monkeypatch")
    for key, value in {**world.env, "SPOTFLEET_CACHE_DIR": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    settings = AwsSettings(regions=[REGION], ami=aws_world.MOTO_AMI)
    return AwsHarness(world, AwsProvider(settings, aws=Aws(retry_delays=(0.01, 0.02, 0.05, 0.1))))
