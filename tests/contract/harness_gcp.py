"""The contract suite's "gcp" target: the real adapter against the fake Compute Engine server
(``tests/fakes/gce_server.py``) and fake-gcs-server, one of each per test session.

Each harness starts from a reset fake; the levers (capacity, faults, someone else's VM, what
is alive) are the fake's control API, never the adapter's internals.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakes.gce_server import GceServer, control  # noqa: E402
from fakes.storage_emulators import EmulatorUnavailable, start_fake_gcs  # noqa: E402

from fleet.model import Market, Offer  # noqa: E402
from providers.base import OfferQuery  # noqa: E402
from providers.gcp.offers import parse_instance_type  # noqa: E402
from providers.gcp.provider import GceApi, GcpProvider  # noqa: E402
from providers.gcp.settings import GcpSettings  # noqa: E402

#: The pool shape the suite launches into: an a2 type carries its GPU, so nothing is attached.
SHAPE = "a2-highgpu-1g"


@lru_cache(maxsize=1)
def gce_server() -> GceServer:
    server = GceServer().start()
    atexit.register(server.stop)
    return server


@lru_cache(maxsize=1)
def gcs_host() -> str:
    try:
        emulator = start_fake_gcs()
    except EmulatorUnavailable:
        return ""
    atexit.register(emulator.stop)
    return emulator.env["STORAGE_EMULATOR_HOST"]


@dataclass
class GcpHarness:
    url: str
    provider: GcpProvider

    def offer(self, market: Market) -> Offer | None:
        offers = sorted(
            (
                o
                for o in self.provider.list_offers(OfferQuery())
                if o.market is market and o.pool.instance_type == SHAPE
            ),
            key=lambda o: o.pool.id,
        )
        return offers[0] if offers else None

    def limit_capacity(self, offer: Offer, n: int) -> None:
        model = "SPOT" if offer.market is Market.SPOT else "STANDARD"
        control(
            self.url,
            "capacity",
            {
                "zone": offer.pool.zone,
                "count": n,
                "provisioningModel": model,
                "machineType": parse_instance_type(offer.pool.instance_type)[0],
            },
        )

    def inject(self, offer: Offer, kind: str, count: int) -> None:
        control(
            self.url,
            "fault",
            {
                "zone": offer.pool.zone,
                "kind": kind,
                "count": count,
                "machineType": parse_instance_type(offer.pool.instance_type)[0],
            },
        )

    def foreign(self, offer: Offer, count: int) -> list[str]:
        names = [f"theirs-{os.urandom(3).hex()}" for _ in range(count)]
        for name in names:
            control(
                self.url,
                "foreign",
                {
                    "zone": offer.pool.zone,
                    "name": name,
                    "machineType": parse_instance_type(offer.pool.instance_type)[0],
                },
            )
        return [f"{offer.pool.zone}/{n}" for n in names]

    def alive(self, ids: list[str]) -> set[str]:
        live = control(self.url, "instances")["instances"]
        found = {f"{i['zone'].rsplit('/', 1)[-1]}/{i['name']}" for i in live if i["status"] != "TERMINATED"}
        return found & set(ids)

    def missing_id(self) -> str:
        return f"us-central1-a/sf-000000-{os.urandom(6).hex()}-000"

    def malform(self, variant: str, count: int) -> None:
        control(self.url, "malformed", {"variant": variant, "count": count})

    def interconnect(self, offer: Offer, name: str) -> dict | None:
        """The compact placement policy ``name`` of the offer's region: the fleet its description
        names as owner ("" for none) and the VMs that use it, ``None`` when there is none."""
        policy = control(self.url, "policies").get(f"{offer.pool.region}/{name}")
        if policy is None:
            return None
        mark = re.fullmatch(r"spotfleet fleet (.+): compact placement for a coupled job", policy["description"])
        return {"owner": mark.group(1) if mark else "", "members": policy["users"]}

    def foreign_interconnect(self, offer: Offer, name: str) -> None:
        """A compact placement policy named ``name`` that no fleet made, through the REST API."""
        import urllib.request

        body = json.dumps({"name": name, "groupPlacementPolicy": {"collocation": "COLLOCATED"}}).encode()
        url = f"{self.url}/compute/v1/projects/contract-test/regions/{offer.pool.region}/resourcePolicies"
        urllib.request.urlopen(
            urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"}),
            timeout=10,
        ).close()


def make_gcp_harness() -> GcpHarness:
    server = gce_server()
    control(server.url, "reset", {})
    api = GceApi("contract-test", endpoint=server.url, retry_delays=(0.01, 0.02, 0.04, 0.08))
    return GcpHarness(
        server.url,
        GcpProvider("contract-test", api=api, storage_host=gcs_host(), settings=GcpSettings(billing_url=server.url)),
    )
