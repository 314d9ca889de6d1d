"""The ``vast`` contract target: the Vast adapter against the fake Vast server (tests/fakes).

One fake server serves the whole session; each harness resets it to a few machines, one of
which rents out 16 bundles of one GPU, on demand and by bid, so a pool has room for the
launches the contract makes. The levers act through the fake's control API.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from vast_server import API_KEY, VastServer  # noqa: E402

from fleet.model import Market, Offer  # noqa: E402
from providers.base import OfferQuery  # noqa: E402
from providers.vast.api import VastApi  # noqa: E402
from providers.vast.offers import parse_instance_type  # noqa: E402
from providers.vast.provider import VastProvider  # noqa: E402

#: The roomy machine the contract launches into, and a second, ordinary one.
ROOMY = {
    "id": 2001,
    "machine_id": 701,
    "num_gpus": 1,
    "gpu_name": "H100 SXM",
    "gpu_ram": 81559,
    "dph_base": 2.3,
    "min_bid": 1.2,
    "reliability2": 0.99,
    "geolocation": "Texas, US",
    "capacity": 16,
}
ASKS = [
    ROOMY,
    {
        "id": 2002,
        "machine_id": 702,
        "num_gpus": 2,
        "gpu_name": "RTX 4090",
        "gpu_ram": 24564,
        "dph_base": 0.8,
        "min_bid": 0.35,
        "reliability2": 0.97,
        "geolocation": "Bavaria, DE",
    },
    {
        "id": 2003,
        "machine_id": 703,
        "num_gpus": 1,
        "gpu_name": "H200",
        "gpu_ram": 143771,
        "dph_base": 3.2,
        "min_bid": None,
        "reliability2": 0.995,
        "geolocation": "Utah, US",
    },
]

_SERVER: VastServer | None = None


def server() -> VastServer:
    """The session's fake Vast server (started on first use)."""
    global _SERVER
    if _SERVER is None:
        _SERVER = VastServer(port=0).start()
    return _SERVER


@dataclass
class VastHarness:
    url: str
    provider: VastProvider

    def _control(self, path: str, body: dict | None = None) -> dict:
        resp = (
            httpx.post(f"{self.url}/_control/{path}", json=body or {})
            if body is not None
            else httpx.get(f"{self.url}/_control/{path}")
        )
        resp.raise_for_status()
        return resp.json()

    def _ask_of(self, offer: Offer) -> int:
        machine = parse_instance_type(offer.pool.instance_type)
        assert machine is not None, offer.pool.id
        asks = self._control("asks")["asks"]
        return next(a["id"] for a in asks if a["machine_id"] == machine[1] and a["num_gpus"] == machine[0])

    def offer(self, market: Market) -> Offer | None:
        want = f"-m{ROOMY['machine_id']}"
        return next(
            (
                o
                for o in self.provider.list_offers(OfferQuery())
                if o.market is market and o.pool.instance_type.endswith(want)
            ),
            None,
        )

    def limit_capacity(self, offer: Offer, n: int) -> None:
        self._control(f"asks/{self._ask_of(offer)}", {"capacity": n})

    def inject(self, offer: Offer, kind: str, count: int) -> None:
        self._control("faults", {"target": f"ask:{self._ask_of(offer)}", "kind": kind, "count": count})

    def foreign(self, offer: Offer, count: int) -> list[str]:
        return [str(i) for i in self._control("foreign", {"ask": self._ask_of(offer), "count": count})["ids"]]

    def alive(self, ids: list[str]) -> set[str]:
        rows = self._control("instances")["instances"]
        return {str(r["id"]) for r in rows if not r["destroyed"]} & set(ids)

    def missing_id(self) -> str:
        return "8999999"

    def malform(self, variant: str, count: int) -> None:
        self._control("faults", {"target": "list", "kind": "malformed", "variant": variant, "count": count})

    def outbid(self, ids: list[str], min_bid: float) -> None:
        """A higher bid takes these instances' machines; the machine's minimum is now ``min_bid``."""
        self._control("outbid", {"ids": [int(i) for i in ids], "min_bid": min_bid})


def vast_harness() -> VastHarness:
    """A harness on a freshly reset fake, with an adapter that retries fast."""
    srv = server()
    httpx.post(f"{srv.url}/_control/reset", json={"asks": ASKS}).raise_for_status()
    api = VastApi(srv.url, API_KEY, retry_delays=(0.01, 0.02, 0.05, 0.1))
    return VastHarness(srv.url, VastProvider(api=api, cache_seconds=0.0))
