"""The ``runpod`` contract target: the RunPod adapter against the fake RunPod REST API v2.

One fake server serves the whole session; each harness resets it and gives the H100 SXM pool
the contract launches into (Secure cloud, US-KS-2) room for 16 pods. RunPod sells no
interruptible pods, so there is no spot offer to launch into. The levers act through the
fake's control API: capacity per (GPU, data center, cloud), faults on creates and listings.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from runpod_server import API_KEY, RunPodServer  # noqa: E402

from fleet.model import Market, Offer  # noqa: E402
from providers.base import OfferQuery  # noqa: E402
from providers.runpod.api import client  # noqa: E402
from providers.runpod.errors import RULES  # noqa: E402
from providers.runpod.offers import parse_instance_type  # noqa: E402
from providers.runpod.provider import RunPodProvider  # noqa: E402

POOL = "runpod/US/US-KS-2/1x_H100-SXM_SECURE/on-demand"
#: The contract's fault kinds as the fake names them (RunPod's quota is the balance: 402).
KINDS = {"quota": "balance"}

_SERVER: RunPodServer | None = None


def server() -> RunPodServer:
    global _SERVER
    if _SERVER is None:
        _SERVER = RunPodServer(port=0).start()
    return _SERVER


@dataclass
class RunPodHarness:
    url: str
    provider: RunPodProvider

    def _control(self, path: str, body: dict | None = None) -> dict:
        resp = (
            httpx.post(f"{self.url}/_control/{path}", json=body)
            if body is not None
            else httpx.get(f"{self.url}/_control/{path}")
        )
        resp.raise_for_status()
        return resp.json()

    def offer(self, market: Market) -> Offer | None:
        return next(
            (
                o
                for o in self.provider.list_offers(OfferQuery())
                if o.market is market and o.pool.id == POOL and o.capacity_hint != 0
            ),
            None,
        )

    def limit_capacity(self, offer: Offer, n: int) -> None:
        shape = parse_instance_type(offer.pool.instance_type)
        assert shape is not None, offer.pool.id
        self._control("stock", {"gpu": shape.gpu_id, "dataCenter": offer.pool.zone, "cloud": shape.cloud, "free": n})

    def inject(self, offer: Offer, kind: str, count: int) -> None:
        self._control("faults", {"target": "create", "kind": KINDS.get(kind, kind), "count": count})

    def foreign(self, offer: Offer, count: int) -> list[str]:
        return self._control("foreign", {"count": count})["ids"]

    def alive(self, ids: list[str]) -> set[str]:
        return {p["id"] for p in self._control("pods")["pods"] if not p["terminated"]} & set(ids)

    def missing_id(self) -> str:
        return "rp99999999"

    def malform(self, variant: str, count: int) -> None:
        self._control("faults", {"target": "list", "kind": "malformed", "variant": variant, "count": count})


def runpod_harness() -> RunPodHarness:
    """A harness on a freshly reset fake, with an adapter that retries fast."""
    srv = server()
    httpx.post(f"{srv.url}/_control/reset", json={}).raise_for_status()
    harness = RunPodHarness(
        srv.url,
        RunPodProvider(
            api=client(srv.url, API_KEY, rules=RULES.with_delays((0.01, 0.02, 0.05, 0.1))), cache_seconds=0.0
        ),
    )
    harness._control("stock", {"gpu": "NVIDIA H100 80GB HBM3", "dataCenter": "US-KS-2", "cloud": "SECURE", "free": 16})
    return harness
