"""Live Compute Engine prices from the Cloud Billing Catalog, cached on disk.

``GET /v1/services/6F81-5844-456A/skus`` lists every Compute Engine SKU with its
``category.usageType`` (``OnDemand``; ``Preemptible`` = Spot), the regions it applies to
(``serviceRegions``) and an hourly ``unitPrice {units, nanos}``. :func:`parse_skus` keeps the ones
a GPU VM is made of: the per-vCPU and per-GiB price of each machine family (``A2 Instance Core``,
``N1 Predefined Instance Ram``...) and each GPU (``Nvidia Tesla T4 GPU``...), and
:meth:`PriceTable.price` composes a machine: vCPUs x core + GiB x RAM + GPUs x GPU, in one region
and market. A shape with a missing part has no live price (the caller uses the snapshot).

The table is cached in ``$SPOTFLEET_HOME/cache`` (default ``~/.spotfleet``) for :data:`TTL` seconds.
``SPOTFLEET_GCP_BILLING_ENDPOINT`` points the fetch at another server, anonymously; otherwise
it uses Application Default Credentials (and is skipped while ``SPOTFLEET_GCE_ENDPOINT`` points
Compute Engine at a stand-in). Any failure returns None: prices then come from the
snapshot and the offers say so.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.home import spotfleet_home
from fleet.model import Market
from providers.gcp import adc

log = logging.getLogger(__name__)

SERVICE = "6F81-5844-456A"  # Compute Engine in the Cloud Billing Catalog
API = "https://cloudbilling.googleapis.com"
ENDPOINT_ENV = "SPOTFLEET_GCP_BILLING_ENDPOINT"
TTL = 24 * 3600.0
SOURCE = "gce-api+billing"
#: SKU GPU names -> GCE accelerator types.
GPU_SKUS = {
    "Tesla T4": "nvidia-tesla-t4",
    "Tesla V100": "nvidia-tesla-v100",
    "Tesla P100": "nvidia-tesla-p100",
    "Tesla P4": "nvidia-tesla-p4",
    "Tesla A100": "nvidia-tesla-a100",
    "A100 80GB": "nvidia-a100-80gb",
    "H100 80GB": "nvidia-h100-80gb",
    "H100 80GB Mega": "nvidia-h100-mega-80gb",
    "L4": "nvidia-l4",
    "H200 141GB": "nvidia-h200-141gb",
}
_USAGE = {"OnDemand": Market.ON_DEMAND, "Preemptible": Market.SPOT}
_MACHINE = re.compile(
    r"^(?:Spot Preemptible )?(?P<family>[A-Z][0-9]+) (?:Predefined )?Instance (?P<part>Core|Ram)"
    r" running in "
)
_GPU = re.compile(r"^(?:Spot Preemptible )?Nvidia (?P<gpu>.+?) GPU running in ")


@dataclass(frozen=True)
class PriceTable:
    """Hourly unit prices: ``(region, part, market) -> USD`` where part is ``a2:core``,
    ``n1:ram`` (per GiB) or an accelerator type (per GPU)."""

    units: dict[tuple[str, str, Market], float]

    def price(
        self,
        region: str,
        market: Market,
        machine: str,
        vcpus: float,
        memory_gib: float,
        accelerator_type: str,
        gpus: int,
    ) -> float | None:
        family = machine.split("-", 1)[0]
        parts = [(f"{family}:core", vcpus), (f"{family}:ram", memory_gib), (accelerator_type, gpus)]
        total = 0.0
        for part, amount in parts:
            unit = self.units.get((region, part, market))
            if unit is None:
                return None
            total += unit * amount
        return round(total, 5)

    def to_json(self) -> list[list[Any]]:
        return [[r, p, m.value, v] for (r, p, m), v in sorted(self.units.items())]

    @classmethod
    def from_json(cls, rows: list[list[Any]]) -> PriceTable:
        return cls({(r, p, Market(m)): float(v) for r, p, m, v in rows})


def _unit_price(sku: dict[str, Any]) -> float | None:
    try:
        rates = sku["pricingInfo"][0]["pricingExpression"]["tieredRates"]
    except (KeyError, IndexError):
        return None
    rate = next((r for r in rates if float(r.get("startUsageAmount", 0)) == 0), rates[0] if rates else None)
    if rate is None:
        return None
    money = rate.get("unitPrice", {})
    return int(money.get("units") or 0) + int(money.get("nanos") or 0) / 1e9


def parse_skus(skus: Iterable[dict[str, Any]]) -> PriceTable:
    """The parts of GPU machines among Compute Engine SKUs (see the module docstring)."""
    units: dict[tuple[str, str, Market], float] = {}
    for sku in skus:
        category = sku.get("category", {})
        market = _USAGE.get(category.get("usageType", ""))
        if market is None or category.get("resourceFamily") != "Compute":
            continue
        text = sku.get("description", "")
        if (m := _MACHINE.match(text)) is not None:
            part = f"{m['family'].lower()}:{m['part'].lower()}"
        elif (g := _GPU.match(text)) is not None and g["gpu"] in GPU_SKUS:
            part = GPU_SKUS[g["gpu"]]
        else:
            continue
        price = _unit_price(sku)
        if price is None:
            continue
        for region in sku.get("serviceRegions", []):
            units[(region, part, market)] = price
    return PriceTable(units)


def _fetch(endpoint: str) -> list[dict[str, Any]]:
    """Every Compute Engine SKU, following pages."""
    if endpoint:
        import requests

        session: Any = requests.Session()
    else:
        if not adc.may_exist():
            raise LookupError("no Google credentials (Application Default Credentials)")
        import google.auth
        from google.auth.transport.requests import AuthorizedSession

        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-billing.readonly"])
        session = AuthorizedSession(credentials)
    skus: list[dict[str, Any]] = []
    token = ""
    for _ in range(100):
        params = {"currencyCode": "USD", "pageSize": "5000", **({"pageToken": token} if token else {})}
        resp = session.get(f"{endpoint or API}/v1/services/{SERVICE}/skus", params=params, timeout=30)
        resp.raise_for_status()
        body = resp.json()
        skus.extend(body.get("skus", []))
        token = body.get("nextPageToken", "")
        if not token:
            break
    return skus


def _cache_path(endpoint: str) -> Path:
    home = spotfleet_home()
    tag = hashlib.sha256((endpoint or API).encode()).hexdigest()[:8]
    return home / "cache" / f"gcp-billing-{tag}.json"


def live_prices(*, stand_in: bool = False, ttl: float = TTL) -> PriceTable | None:
    """The price table from the cache when fresh, else from the Billing Catalog; None on any failure.

    ``stand_in``: Compute Engine is another server (``SPOTFLEET_GCE_ENDPOINT``); then the real
    catalog is not asked with real credentials, only ``SPOTFLEET_GCP_BILLING_ENDPOINT`` if set.
    """
    endpoint = os.environ.get(ENDPOINT_ENV, "").rstrip("/")
    if stand_in and not endpoint:
        return None
    path = _cache_path(endpoint)
    try:
        cached = json.loads(path.read_text())
        if time.time() - float(cached["fetched_at"]) < ttl:
            return PriceTable.from_json(cached["units"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        table = parse_skus(_fetch(endpoint))
    except Exception as err:  # any failure (no credentials, HTTP, JSON): the snapshot serves
        log.warning(
            "gcp: Cloud Billing Catalog unavailable (%s: %s); prices from the snapshot", type(err).__name__, err
        )
        return None
    if not table.units:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"fetched_at": time.time(), "units": table.to_json()}))
        tmp.replace(path)
    except OSError as err:
        log.warning("gcp: cannot cache prices in %s: %s", path, err)
    return table
