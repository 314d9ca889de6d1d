"""The ``oci`` contract target: the OCI adapter, through the real ``oci`` SDK, against the fake
OCI Core Services / Identity API (tests/fakes/oci_server.py).

One fake serves the whole session; each harness resets it. The offers used are VM.GPU.A10.1 in
the first availability domain (on-demand and preemptible; the fake has no capacity limit unless
told). The levers act through the fake's control API.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from oci_server import ADS, COMPARTMENT, IMAGE, SUBNET, OciServer  # noqa: E402

from fleet.model import Market, Offer  # noqa: E402
from providers.base import OfferQuery  # noqa: E402
from providers.kit.retry import Retrier  # noqa: E402
from providers.oci.api import OciApi, load_config  # noqa: E402
from providers.oci.errors import RULES  # noqa: E402
from providers.oci.provider import OciProvider  # noqa: E402
from providers.oci.settings import OciSettings  # noqa: E402

SHAPE = "VM.GPU.A10.1"
_SESSION: dict[str, object] = {}


def session() -> tuple[OciServer, OciApi, Path]:
    """The session's fake OCI API (started on first use), one SDK client pair signing with a
    throwaway API key, and one key folder for the fleets' SSH keys (RSA keys take a while to make)."""
    if not _SESSION:
        srv = OciServer(port=0).start()
        root = Path(tempfile.mkdtemp(prefix="oci-contract-"))
        env = srv.write_config(root / "oci")
        api = OciApi(
            load_config(env["SPOTFLEET_OCI_CONFIG"]),
            endpoint=srv.url,
            retrier=Retrier(RULES.with_delays((0.01, 0.02, 0.05, 0.1))),
        )
        _SESSION.update(server=srv, api=api, home=root / "home")
    return _SESSION["server"], _SESSION["api"], _SESSION["home"]  # type: ignore[return-value]


@dataclass
class OciHarness:
    url: str
    provider: OciProvider

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
                if o.market is market and o.pool.instance_type == SHAPE and o.pool.zone == ADS[0]
            ),
            None,
        )

    def limit_capacity(self, offer: Offer, n: int) -> None:
        self._control("capacity", {"ad": offer.pool.zone, "shape": offer.pool.instance_type, "hosts": n})

    def inject(self, offer: Offer, kind: str, count: int) -> None:
        self._control("faults", {"target": "launch", "kind": kind, "count": count})

    def foreign(self, offer: Offer, count: int) -> list[str]:
        return self._control("foreign", {"shape": offer.pool.instance_type, "ad": offer.pool.zone, "count": count})[
            "ids"
        ]

    def alive(self, ids: list[str]) -> set[str]:
        rows = self._control("instances")["instances"]
        return {r["id"] for r in rows if r["lifecycleState"] not in ("TERMINATING", "TERMINATED")} & set(ids)

    def missing_id(self) -> str:
        return "ocid1.instance.oc1.iad.aaaaaaaadoesnotexist"

    def malform(self, variant: str, count: int) -> None:
        self._control("faults", {"target": "list", "kind": "malformed", "variant": variant, "count": count})


def oci_harness() -> OciHarness:
    """A harness on a freshly reset fake, with a fresh adapter (as a new process makes) that retries fast."""
    srv, api, home = session()
    httpx.post(f"{srv.url}/_control/reset", json={}).raise_for_status()
    settings = OciSettings(compartment_id=COMPARTMENT, subnet_id=SUBNET, image_id=IMAGE)
    return OciHarness(srv.url, OciProvider(settings, api, cache_seconds=0.0, home=home, environ={}))
