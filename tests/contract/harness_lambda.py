"""The ``lambda`` contract target: the Lambda adapter against the fake Lambda server (tests/fakes).

One fake server serves the whole session; each harness resets it so that one A10 pool
(us-east-1) has room for 16 instances and another type has room for a few. Lambda sells
on-demand only, so the spot market has no offer. The levers act through the fake's control API.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from lambda_server import API_KEY, LambdaServer  # noqa: E402

from fleet.model import Market, Offer  # noqa: E402
from providers.base import OfferQuery  # noqa: E402
from providers.lambda_cloud.api import LambdaApi  # noqa: E402
from providers.lambda_cloud.provider import LambdaProvider  # noqa: E402

ROOMY = ("gpu_1x_a10", "us-east-1")
CAPACITY = {f"{ROOMY[0]}/{ROOMY[1]}": 16, "gpu_1x_gh200/us-east-3": 4}

_SERVER: LambdaServer | None = None


def server() -> LambdaServer:
    """The session's fake Lambda server (started on first use)."""
    global _SERVER
    if _SERVER is None:
        _SERVER = LambdaServer(port=0).start()
    return _SERVER


@dataclass
class LambdaHarness:
    url: str
    provider: LambdaProvider

    def _control(self, path: str, body: dict | None = None) -> dict:
        resp = (
            httpx.post(f"{self.url}/_control/{path}", json=body)
            if body is not None
            else httpx.get(f"{self.url}/_control/{path}")
        )
        resp.raise_for_status()
        return resp.json()

    def _live(self) -> list[dict]:
        return [r for r in self._control("instances")["instances"] if r["status"] not in ("terminating", "terminated")]

    def offer(self, market: Market) -> Offer | None:
        return next(
            (
                o
                for o in self.provider.list_offers(OfferQuery())
                if o.market is market and (o.pool.instance_type, o.pool.region) == ROOMY
            ),
            None,
        )

    def limit_capacity(self, offer: Offer, n: int) -> None:
        held = sum(
            1
            for r in self._live()
            if r["instance_type"]["name"] == offer.pool.instance_type and r["region"]["name"] == offer.pool.region
        )
        self._control(
            "capacity", {"type": offer.pool.instance_type, "region": offer.pool.region, "count": max(0, n - held)}
        )

    def inject(self, offer: Offer, kind: str, count: int) -> None:
        self._control("faults", {"target": "launch", "kind": kind, "count": count})

    def foreign(self, offer: Offer, count: int) -> list[str]:
        return self._control(
            "foreign", {"type": offer.pool.instance_type, "region": offer.pool.region, "count": count}
        )["ids"]

    def alive(self, ids: list[str]) -> set[str]:
        return {r["id"] for r in self._live()} & set(ids)

    def missing_id(self) -> str:
        return "0" * 32

    def malform(self, variant: str, count: int) -> None:
        self._control("faults", {"target": "list", "kind": "malformed", "variant": variant, "count": count})


def lambda_harness(tmp_path: Path) -> LambdaHarness:
    """A harness on a freshly reset fake, with an adapter that retries fast (the fleet's SSH key
    pair under ``tmp_path``)."""
    srv = server()
    httpx.post(f"{srv.url}/_control/reset", json={"capacity": CAPACITY}).raise_for_status()
    httpx.post(
        f"{srv.url}/_control/config",
        json={"boot_seconds": 0, "terminate_seconds": 0, "launch_interval": 0, "quota": 50, "latency": 0},
    ).raise_for_status()
    api = LambdaApi(srv.url, API_KEY, retry_delays=(0.01, 0.02, 0.05, 0.1), launch_interval=0.01)
    return LambdaHarness(srv.url, LambdaProvider(api=api, cache_seconds=0.0, home=tmp_path, environ={}))
