"""The Azure adapters' test harness against the fake ARM server (tests/fakes/azure_arm.py):
``Fake`` builds the VM adapter on it and reads its control API, ``ScaleSetFake`` the scale-set
adapter; ``_offer``/``_request`` and ``set_offer``/``set_request`` pick an offer and ask for a launch.
The server itself is the ``arm_server`` fixture (tests/providers/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from azure_arm import SUBSCRIPTION  # noqa: E402

from fleet.model import LaunchRequest, Market, fleet_tags  # noqa: E402
from providers.azure.arm import Arm  # noqa: E402
from providers.azure.prices import RetailPrices  # noqa: E402
from providers.azure.provider import AzureProvider  # noqa: E402
from providers.azure.scaleset_provider import AzureScaleSetProvider  # noqa: E402
from providers.azure.settings import AzureSettings  # noqa: E402
from providers.base import OfferQuery  # noqa: E402
from support.fake_control import control  # noqa: E402

RG = "unit"
#: A real ED25519 public key (its private half was thrown away): the fake takes only well-formed keys, as Azure does.
USER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOJeJRx056DrxjM6IzS+i13fiJZqj9l2Hiv1VVvDdmVz user@laptop"


class Fake:
    def __init__(self, url: str, home: Path):
        self.url = url
        self.home = home  # the state folder: where the fleets' own SSH key pairs go
        self.sleeps: list[float] = []
        self.control("reset", {})

    def control(self, path: str, body: dict | None = None) -> dict:
        return control(self.url, path, body)

    def provider(self, cache: Path | None = None, **settings) -> AzureProvider:
        arm = Arm(SUBSCRIPTION, self.url, polling_interval=0, sleep=self.sleeps.append)
        return AzureProvider(
            AzureSettings(resource_group=RG, **settings),
            arm=arm,
            environ={},
            cache_seconds=0,
            prices=RetailPrices(f"{self.url}/api/retail/prices", cache),
            home=self.home,
        )


def _offer(provider: AzureProvider, market=Market.SPOT, region="westus2"):
    return next(o for o in provider.list_offers(OfferQuery()) if o.market is market and o.pool.region == region)


def _request(offer, count=2, token="t1", **extra) -> LaunchRequest:
    return LaunchRequest(
        fleet="alpha", offer=offer, count=count, token=token, tags=fleet_tags("alpha", offer.pool, "plan9"), **extra
    )


#: The scale-set tests' resource group and sizes.
SET_RG = "mix"
A100 = "Standard_NC24ads_A100_v4"
ND = "Standard_ND96asr_v4"


class ScaleSetFake(Fake):
    def provider(self) -> AzureScaleSetProvider:
        arm = Arm(SUBSCRIPTION, self.url, polling_interval=0)
        return AzureScaleSetProvider(
            AzureSettings(resource_group=SET_RG, launch_mode="scale-set"),
            arm=arm,
            environ={},
            cache_seconds=0,
            live_prices=False,
            home=self.home,
        )

    def sets(self) -> list[dict]:
        return self.control("state")["scale_sets"]

    def members(self, name: str) -> list[dict]:
        return [
            v
            for v in self.control("state")["vms"]
            if (v["properties"].get("virtualMachineScaleSet") or {}).get("id", "").endswith(f"/{name}")
        ]


def set_offer(provider, size=A100, market=Market.SPOT, region="eastus"):
    return next(
        o
        for o in provider.list_offers(OfferQuery())
        if o.market is market and o.pool.region == region and o.pool.instance_type == size
    )


def set_request(offer, count, token, fleet="alpha", **extra) -> LaunchRequest:
    return LaunchRequest(
        fleet=fleet, offer=offer, count=count, token=token, tags=fleet_tags(fleet, offer.pool, "plan9"), **extra
    )
