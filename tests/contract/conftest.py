"""Targets of the provider contract suite.

Each target is a ``Harness``: the Provider under test plus the few levers a test needs
on the world behind it (limit a pool's capacity, inject a fault, start someone else's
instance, check what is still alive). The local cloud's harness pulls those levers
directly; a cloud adapter's harness pulls them on its emulator or fake server
(moto behind a fault-injecting proxy, the fake GCE/ARM/Vast servers in tests/fakes).
Add a target by adding a param to ``TARGETS`` and a branch to ``_make_harness``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from fleet.model import Market, Offer
from providers.base import OfferQuery, Provider
from providers.local import LocalCloud
from providers.local.vendors import VENDORS

#: The local cloud simulates every vendor; each simulated vendor is a target.
TARGETS = [
    "local:aws",
    "local:gcp",
    "local:azure",
    "local:vast",
    "local:lambda",
    "local:runpod",
    "local:oci",
    "vast",
    "aws",
    "gcp",
    "azure",
    "azure:scale-set",
    "oci",
    "lambda",
    "runpod",
]


class Harness(Protocol):
    provider: Provider

    def offer(self, market: Market) -> Offer | None:
        """An offer with room for at least 8 instances, None if the provider has no such market."""

    def limit_capacity(self, offer: Offer, n: int) -> None:
        """Make ``offer``'s pool hold at most ``n`` instances in all."""

    def inject(self, offer: Offer, kind: str, count: int) -> None:
        """The next ``count`` launch attempts into ``offer``'s pool fail with ``kind``."""

    def foreign(self, offer: Offer, count: int) -> list[str]:
        """Start instances without spotfleet tags (someone else's); their ids."""

    def alive(self, ids: list[str]) -> set[str]:
        """Which of ``ids`` still exist, seen from outside the adapter."""

    def missing_id(self) -> str:
        """A well-formed instance id that does not exist."""

    def malform(self, variant: str, count: int) -> None:
        """The next ``count`` instance listings answer HTTP 200 with a broken body (``variant``:
        one of ``tests/fakes/malformed.py``'s); skips where the target has no wire format."""


#: Levers only targets of some abilities have (the ability's contract test skips without them):
#: ``outbid(ids, min_bid)``: a higher bid takes these instances' machines (``RaisesBids``).


@dataclass
class LocalHarness:
    cloud: LocalCloud
    provider: Provider

    def offer(self, market: Market) -> Offer | None:
        offers = sorted(
            (o for o in self.provider.list_offers(OfferQuery()) if o.market is market and (o.capacity_hint or 0) >= 8),
            key=lambda o: o.pool.id,
        )
        return offers[0] if offers else None

    def limit_capacity(self, offer: Offer, n: int) -> None:
        self.cloud.set_capacity(offer.pool.id, n)

    def inject(self, offer: Offer, kind: str, count: int) -> None:
        self.cloud.inject_fault(offer.pool.id, kind, count)

    def foreign(self, offer: Offer, count: int) -> list[str]:
        return [i.id for i in self.cloud.launch_foreign(offer.pool.id, count)]

    def alive(self, ids: list[str]) -> set[str]:
        return {i.id for i in self.cloud.all_instances(alive_only=True)} & set(ids)

    def missing_id(self) -> str:
        return VENDORS[self.provider.name].make_id(os.urandom(32))

    def malform(self, variant: str, count: int) -> None:
        pytest.skip("the local cloud is called in process: there is no answer on the wire to break")


def _make_harness(target: str, tmp_path: Path, request: pytest.FixtureRequest) -> Harness:
    family, _, name = target.partition(":")
    if family == "aws":
        from harness_aws import make as make_aws

        return make_aws(request, tmp_path)
    if family == "local":
        cloud = LocalCloud.open(tmp_path / "cloud", time_scale=0)  # frozen clock: nothing moves unless told
        return LocalHarness(cloud, cloud.provider(name))
    if family == "vast":
        from tests.contract.harness_vast import vast_harness

        return vast_harness()
    if family == "runpod":
        from tests.contract.harness_runpod import runpod_harness

        return runpod_harness()
    if family == "gcp":
        from harness_gcp import make_gcp_harness

        return make_gcp_harness()
    if family == "azure":
        from tests.contract.harness_azure import azure_harness

        return azure_harness(name or "vms")
    if family == "oci":
        from tests.contract.harness_oci import oci_harness

        return oci_harness()
    if family == "lambda":
        from tests.contract.harness_lambda import lambda_harness

        return lambda_harness(tmp_path)
    raise ValueError(f"unknown contract target {target}")


@pytest.fixture(params=TARGETS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    return _make_harness(request.param, tmp_path, request)


@pytest.fixture
def provider(harness: Harness) -> Provider:
    return harness.provider
