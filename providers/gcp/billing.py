"""What Compute Engine bills for the fleet's VMs, from the Cloud Billing Catalog (``providers.base.ReadsBilledRate``).

GCE has no per-VM rate. The catalog prices a VM in parts, so the rate is composed from the SKUs
that make up its machine type, in its region and market (``Preemptible`` usage for Spot,
``OnDemand`` otherwise): vCPUs x the family's ``Instance Core`` price + GiB of memory x its
``Instance Ram`` price + GPUs x the GPU's price (``Nvidia H100 80GB GPU``...; attached cards on
n1 hosts, built-in ones on a2/a3/g2), the composition of ``providers.gcp.pricing.PriceTable``.
The machine type's vCPUs, memory and GPUs come from GCE's aggregated ``machineTypes`` list (the VM's zone).
Included: cores, memory and GPUs only -- no boot disk, local SSD, network or OS licence.
Source ``price-api``, rental ``spot``/``on-demand``. Where the catalog lacks a part for the
family (a family whose SKUs it names differently), the rate is the shipped catalog's list price
of that shape, source ``list``, never a guess; a shape neither prices is left out.

The catalog answer is read strictly: a page without ``skus``, a SKU without a ``description``
or ``category``, a price without ``unitPrice`` is MalformedResponseError, never "no price".

API: https://cloud.google.com/billing/v1/how-tos/catalog-api and
https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list
(``GET /v1/services/6F81-5844-456A/skus?currencyCode=USD&pageSize=&pageToken=``; pages of at most
5000 SKUs, ``nextPageToken`` absent on the last; an API key or OAuth token is required, so the
public endpoint is asked with Application Default Credentials).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from fleet.errors import AuthError, ProviderError
from fleet.model import BilledRate, Instance, Market
from providers.gcp.pricing import API, SERVICE, PriceTable, parse_skus
from providers.kit.errors import ErrorTable
from providers.kit.http import JsonClient
from providers.kit.responses import check
from providers.kit.retry import RetryRules

MAX_PAGES = 100
TABLE = ErrorTable("gcp")
RULES = RetryRules(max_attempts=4, base_delay=0.5, max_delay=4.0, max_total_seconds=20.0)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class Money(_Answer):
    units: int | str = 0
    nanos: int = 0


class TieredRate(_Answer):
    startUsageAmount: float = 0.0  # noqa: N815  (the API's names)
    unitPrice: Money  # noqa: N815


class Expression(_Answer):
    tieredRates: list[TieredRate]  # noqa: N815


class PricingInfo(_Answer):
    pricingExpression: Expression  # noqa: N815


class Category(_Answer):
    resourceFamily: str = ""  # noqa: N815
    resourceGroup: str = ""  # noqa: N815
    usageType: str = ""  # noqa: N815


class Sku(_Answer):
    description: str
    category: Category
    serviceRegions: list[str] = []  # noqa: N815
    pricingInfo: list[PricingInfo] = []  # noqa: N815


class Page(_Answer):
    skus: list[Sku]
    nextPageToken: str = ""  # noqa: N815


def _to_error(status: int, body: Any, what: str, retry_after: float | None) -> ProviderError:
    err = body.get("error") if isinstance(body, dict) else None
    msg = str(err.get("message") or "") if isinstance(err, dict) else ""
    return TABLE.error(f"{what}: {msg or 'HTTP ' + str(status)}", status=status, retry_after=retry_after)


def _adc_headers() -> dict[str, str]:
    """A bearer token from Application Default Credentials (the public catalog wants one)."""
    try:
        import google.auth
        from google.auth.transport.requests import Request

        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-billing.readonly"])
        credentials.refresh(Request())
        return {"Authorization": f"Bearer {credentials.token}"}
    except Exception as err:  # no credentials, refused, unreachable: one clear error
        raise AuthError(
            "gcp",
            f"Cloud Billing Catalog: no usable Google credentials ({type(err).__name__}); "
            "run `gcloud auth application-default login` or set billing_url",
            code="no-credentials",
        ) from None


class CatalogBills:
    """The Cloud Billing Catalog at ``url`` (the provider's ``billing_url`` setting); anonymous
    unless ``url`` is the public API."""

    def __init__(self, url: str = API, *, page_size: int = 5000, sleep: Callable[[float], None] | None = None):
        self.url = url.rstrip("/")
        self.page_size = page_size
        self._sleep = sleep
        self._client: JsonClient | None = None

    def _http(self) -> JsonClient:
        if self._client is None:
            kw: dict[str, Any] = {"sleep": self._sleep} if self._sleep is not None else {}
            if self.url == API:
                kw["auth_headers"] = _adc_headers()
            self._client = JsonClient("gcp", self.url, rules=RULES, to_error=_to_error, **kw)
        return self._client

    def table(self) -> PriceTable:
        """The unit prices of every GPU machine part (all pages; see the module doc)."""
        client = self._http()
        params: dict[str, Any] = {"currencyCode": "USD", "pageSize": str(self.page_size)}
        skus: list[dict[str, Any]] = []
        what = "list Compute Engine SKUs"
        for _ in range(MAX_PAGES):
            data = client.request(
                "GET", f"/v1/services/{SERVICE}/skus", what=what, params=params, auth=client.has_auth, idempotent=True
            )
            page = check(Page, data, provider="gcp", what=what)
            skus.extend(s.model_dump() for s in page.skus)
            if not page.nextPageToken:
                return parse_skus(skus)
            params = {**params, "pageToken": page.nextPageToken}
        raise ProviderError("gcp", f"{what}: paging did not end after {MAX_PAGES} pages", code="paging")


def billed_rates(bills: CatalogBills, api: Any, alive: Sequence[Instance], now: float) -> dict[str, BilledRate]:
    """Instance id -> its billed rate (see the module doc): one catalog listing and one
    aggregated ``machineTypes`` listing; a machine type GCE no longer lists in the zone is left out."""
    from providers.gcp.offers import ACCELERATORS, Shape, _aggregated, parse_instance_type, price

    if not alive:
        return {}
    table = bills.table()
    listed = _aggregated(api, api.machine_types, "machine_types", "compute#machineTypeAggregatedList")
    types = {(zone, r.name): r for zone, rows in listed.items() for r in rows}
    shapes: dict[tuple[str, str], Shape | None] = {}
    out: dict[str, BilledRate] = {}
    for inst in alive:
        key = (inst.pool.zone, inst.pool.instance_type)
        if key not in shapes:
            machine, attached, count = parse_instance_type(inst.pool.instance_type)
            mt = types.get((inst.pool.zone, machine))
            built = [
                (a.guest_accelerator_type, a.guest_accelerator_count)
                for a in (mt.accelerators if mt else [])
                if a.guest_accelerator_type in ACCELERATORS
            ]
            acc, gpus = (attached, count) if attached else (built[0] if built else ("", 0))
            shapes[key] = (
                Shape(
                    inst.pool.zone,
                    inst.pool.instance_type,
                    machine,
                    acc,
                    gpus,
                    bool(attached),
                    float(mt.guest_cpus),
                    round(mt.memory_mb / 1024, 1),
                )
                if acc and mt
                else None
            )
        shape = shapes[key]
        if shape is None:
            continue
        rental = "spot" if inst.pool.market is Market.SPOT else "on-demand"
        composed = table.price(
            shape.region,
            inst.pool.market,
            shape.machine_type,
            shape.vcpus or 0.0,
            shape.memory_gib or 0.0,
            shape.accelerator_type,
            shape.gpus,
        )
        if composed is not None:
            out[inst.id] = BilledRate(per_hour=composed, source="price-api", rental=rental, at=now)
        elif (listed := price(shape, inst.pool.market)) is not None:
            out[inst.id] = BilledRate(per_hour=listed, source="list", rental=rental, at=now)
    return out
