"""The ``azure`` contract target: the Azure adapter, with the real azure-mgmt clients, against the
fake ARM server (tests/fakes/azure_arm.py); checkpoint containers on Azurite.

One fake serves the whole session; each harness resets it (the default GPU SKUs, roomy capacity).
The levers act through the fake's control API.
"""

from __future__ import annotations

import atexit
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from azure_arm import SUBSCRIPTION, ArmServer  # noqa: E402

from fleet.model import TAG_FLEET, Market, Offer  # noqa: E402
from providers.azure.arm import Arm  # noqa: E402
from providers.azure.prices import RetailPrices  # noqa: E402
from providers.azure.provider import AzureProvider  # noqa: E402
from providers.base import OfferQuery  # noqa: E402

_SERVER: ArmServer | None = None
_AZURITE: dict[str, str] | None = None
RESOURCE_GROUP = "contract"


def server() -> ArmServer:
    """The session's fake ARM server (started on first use)."""
    global _SERVER
    if _SERVER is None:
        _SERVER = ArmServer(port=0).start()
    return _SERVER


def storage_env() -> dict[str, str]:
    """Azurite's connection string (started once, stopped when the test process exits); {} when
    Azurite is not installed."""
    global _AZURITE
    if _AZURITE is None:
        from storage_emulators import EmulatorUnavailable, start_azurite

        try:
            emulator = start_azurite()
        except EmulatorUnavailable:
            _AZURITE = {}
        else:
            atexit.register(emulator.stop)
            _AZURITE = dict(emulator.env)
    return _AZURITE


def priority(offer: Offer) -> str:
    return "Spot" if offer.market is Market.SPOT else "Regular"


@dataclass
class AzureHarness:
    url: str
    provider: AzureProvider

    def _control(self, path: str, body: dict | None = None) -> dict:
        resp = (
            httpx.post(f"{self.url}/_control/{path}", json=body or {})
            if body is not None
            else httpx.get(f"{self.url}/_control/{path}")
        )
        resp.raise_for_status()
        return resp.json()

    def _target(self, offer: Offer) -> str:
        return f"{offer.pool.region}/{offer.pool.instance_type}/{priority(offer)}"

    def offer(self, market: Market) -> Offer | None:
        return next(
            (o for o in self.provider.list_offers(OfferQuery()) if o.market is market and o.pool.region == "westus2"),
            None,
        )

    def limit_capacity(self, offer: Offer, n: int) -> None:
        self._control("capacity", {"target": self._target(offer), "count": n})

    def inject(self, offer: Offer, kind: str, count: int) -> None:
        self._control("faults", {"target": self._target(offer), "kind": kind, "count": count})

    def foreign(self, offer: Offer, count: int) -> list[str]:
        return self._control(
            "foreign",
            {
                "resource_group": RESOURCE_GROUP,
                "location": offer.pool.region,
                "size": offer.pool.instance_type,
                "priority": priority(offer),
                "count": count,
            },
        )["names"]

    def alive(self, ids: list[str]) -> set[str]:
        return {v["name"] for v in self._control("state")["vms"]} & set(ids)

    def missing_id(self) -> str:
        return "sf-000000000000-0"

    def malform(self, variant: str, count: int) -> None:
        self._control("malformed", {"target": "vms", "variant": variant, "count": count})

    def interconnect(self, offer: Offer, name: str) -> dict | None:
        """The proximity placement group ``name``: the fleet its tag names as owner ("" for none) and
        the VMs in it, ``None`` when there is none. Scale sets do not join one (skipped)."""
        if type(self.provider) is not AzureProvider:
            pytest.skip("the scale-set adapter launches no proximity placement group")
        group = next((g for g in self._control("state")["ppgs"] if g["name"] == name), None)
        if group is None:
            return None
        return {
            "owner": (group.get("tags") or {}).get(TAG_FLEET, ""),
            "members": [vm["id"].rsplit("/", 1)[-1] for vm in group["properties"]["virtualMachines"]],
        }

    def foreign_interconnect(self, offer: Offer, name: str) -> None:
        """A proximity placement group named ``name`` that no fleet made, through the ARM API."""
        if type(self.provider) is not AzureProvider:
            pytest.skip("the scale-set adapter launches no proximity placement group")
        base = f"{self.url}/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}"
        httpx.put(base, json={"location": offer.pool.region}).raise_for_status()
        httpx.put(
            f"{base}/providers/Microsoft.Compute/proximityPlacementGroups/{name}",
            json={"location": offer.pool.region, "properties": {}},
        ).raise_for_status()


def azure_harness(launch_mode: str = "vms") -> AzureHarness:
    """A harness on a freshly reset fake, polling without delay and absorbing throttles at once;
    ``launch_mode: scale-set`` tests the adapter that launches Flexible scale sets."""
    srv = server()
    httpx.post(f"{srv.url}/_control/reset", json={}).raise_for_status()
    arm = Arm(SUBSCRIPTION, srv.url, polling_interval=0, sleep=lambda s: None)
    from providers.azure.scaleset_provider import AzureScaleSetProvider
    from providers.azure.settings import AzureSettings

    cls = AzureScaleSetProvider if launch_mode == "scale-set" else AzureProvider
    provider = cls(
        AzureSettings(
            resource_group=RESOURCE_GROUP, launch_mode=launch_mode, prices_url=f"{srv.url}/api/retail/prices"
        ),
        arm=arm,
        environ=storage_env(),
        cache_seconds=0.0,
        prices=RetailPrices(f"{srv.url}/api/retail/prices"),
        home=Path(tempfile.mkdtemp(prefix="spotfleet-contract-")),
    )  # the fleets' own SSH keys
    return AzureHarness(srv.url, provider)
