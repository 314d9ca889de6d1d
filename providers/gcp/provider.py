"""``GcpProvider``: Spot and on-demand GPU VMs on Compute Engine, checkpoints on GCS.

The Provider protocol (``providers.base``) over google-cloud-compute's REST transport. The
work lives in one module per job: :mod:`.offers` (machine and accelerator types per zone,
priced), :mod:`.launch` (insert / bulkInsert with deterministic names and requestIds),
:mod:`.instances` (listing by label, terminate), :mod:`.storage` (the checkpoint bucket).
This module builds the clients, finds the project, and makes every API call through
:meth:`GceApi.call`, which turns Google's exceptions into ours and retries throttling; an
answer the client cannot parse (truncated, HTML, wrong types) is MalformedResponseError, and
list calls go through :meth:`GceApi.pages`, which also refuses a page that is not the list
asked for (``{}`` parses as an empty one).

``SPOTFLEET_GCE_ENDPOINT`` (for example ``http://127.0.0.1:8089``) points every Compute
Engine client at another server, with anonymous credentials, the way
``STORAGE_EMULATOR_HOST`` does for Cloud Storage; without it the clients use Application
Default Credentials against the real API.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from fleet.errors import AuthError, ProviderError, TransientProviderError
from fleet.model import BilledRate, Instance, LaunchRequest, LaunchResult, Offer
from fleet.spec import FleetSpec
from providers.base import BucketRef, OfferQuery, StorageSpec
from providers.gcp import errors
from providers.gcp.project import ENDPOINT_ENV, PROJECT_ENVS, endpoint_override, resolve_project  # noqa: F401
from providers.gcp.settings import GcpSettings
from providers.kit.responses import malformed
from providers.kit.retry import Retrier

#: Seconds slept before each retry of a throttled call (full jitter below each value).
RETRY_DELAYS = errors.RULES.delays or ()
#: Per-call timeout in seconds (the client's own retry of reads is turned off: we retry here).
CALL_TIMEOUT = 60.0
#: Seconds a zone operation may take before the wait gives up.
OPERATION_LIMIT = 900.0

T = TypeVar("T")


@dataclass
class GceApi:
    """The Compute Engine clients of one project and the one way every call is made."""

    project: str
    endpoint: str = field(default_factory=endpoint_override)
    retry_delays: Sequence[float] = RETRY_DELAYS
    sleep: Callable[[float], None] = time.sleep

    @cached_property
    def retrier(self) -> Retrier:
        return Retrier(errors.RULES.with_delays(tuple(self.retry_delays)), sleep=self.sleep)

    def _client(self, cls: Any) -> Any:
        kwargs: dict[str, Any] = {"transport": "rest"}
        if self.endpoint:
            from google.api_core.client_options import ClientOptions
            from google.auth.credentials import AnonymousCredentials

            kwargs.update(client_options=ClientOptions(api_endpoint=self.endpoint), credentials=AnonymousCredentials())
        try:
            return cls(**kwargs)
        except Exception as err:  # DefaultCredentialsError and friends: no usable credentials here
            raise AuthError(
                "gcp",
                f"no Google credentials ({type(err).__name__}: {err}); run "
                "`gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS",
                code="NoCredentials",
            ) from err

    @cached_property
    def compute(self) -> Any:
        from google.cloud import compute_v1

        return compute_v1

    @cached_property
    def instances(self) -> Any:
        return self._client(self.compute.InstancesClient)

    @cached_property
    def zone_operations(self) -> Any:
        return self._client(self.compute.ZoneOperationsClient)

    @cached_property
    def global_operations(self) -> Any:
        return self._client(self.compute.GlobalOperationsClient)

    @cached_property
    def machine_types(self) -> Any:
        return self._client(self.compute.MachineTypesClient)

    @cached_property
    def accelerator_types(self) -> Any:
        return self._client(self.compute.AcceleratorTypesClient)

    @cached_property
    def regions(self) -> Any:
        return self._client(self.compute.RegionsClient)

    @cached_property
    def resource_policies(self) -> Any:
        return self._client(self.compute.ResourcePoliciesClient)

    @cached_property
    def region_operations(self) -> Any:
        return self._client(self.compute.RegionOperationsClient)

    def call(
        self,
        fn: Callable[..., T],
        *,
        region: str = "",
        read: bool = False,
        what: str = "Compute Engine call",
        **kwargs: Any,
    ) -> T:
        """``fn(**kwargs)`` with our errors: throttling (and, for reads, 5xx) retried (``errors.RULES``).

        A mutation's 5xx is raised at once as TransientProviderError: its requestId makes the
        caller's retry safe, and the executor decides when. An answer that does not parse is
        MalformedResponseError (naming ``what``), at once.
        """
        from google.api_core import exceptions as gexc
        from google.auth import exceptions as auth_exc
        from google.protobuf import json_format

        def once() -> T:
            try:
                return fn(**kwargs, retry=None, timeout=CALL_TIMEOUT)
            except gexc.GoogleAPICallError as exc:
                raise errors.from_api_error(exc, region=region) from None
            except (auth_exc.TransportError, gexc.RetryError, OSError) as exc:  # requests' errors are OSErrors
                raise TransientProviderError(
                    "gcp", f"cannot reach Compute Engine: {exc}", region=region, code="connection"
                ) from None
            except auth_exc.GoogleAuthError as exc:
                raise AuthError("gcp", f"credentials refused: {exc}", region=region, code="authError") from None
            except json_format.ParseError as exc:
                raise malformed("gcp", what, detail=str(exc), region=region) from None

        return self.retrier.call(once, idempotent=read)

    def pages(self, fn: Callable[..., Any], *, kind: str, what: str, region: str = "", **kwargs: Any) -> list[Any]:
        """Every page of the list call ``fn(**kwargs)``, all fetched inside :meth:`call` (a later
        page that fails is the same one-line error as the first); a page whose ``kind`` is not
        ``kind`` (``compute#instanceAggregatedList``...: GCE names every list it answers) is
        MalformedResponseError."""
        found = self.call(lambda **kw: list(fn(**kw).pages), region=region, read=True, what=what, **kwargs)
        for page in found:
            if page.kind != kind:
                raise malformed("gcp", what, detail=f"the answer is not a {kind} (kind {page.kind!r})", region=region)
        return found

    def wait(self, zone: str, operation: Any, *, limit: float = OPERATION_LIMIT) -> Any:
        """Wait for a zone operation to be DONE (``zoneOperations.wait`` returns within two minutes
        on GCE, so it is called until DONE) and return it; TransientProviderError after ``limit``
        seconds (the requestId makes the caller's retry safe)."""
        region = zone.rsplit("-", 1)[0]
        return self._until_done(
            operation,
            zone,
            region,
            limit,
            lambda name: self.call(
                self.zone_operations.wait, read=True, region=region, project=self.project, zone=zone, operation=name
            ),
        )

    def wait_region(self, region: str, operation: Any, *, what: str, limit: float = OPERATION_LIMIT) -> Any:
        """Wait for a region operation as :meth:`wait` does for a zone's; its error, if it failed, is raised."""
        op = self._until_done(
            operation,
            region,
            region,
            limit,
            lambda name: self.call(
                self.region_operations.wait,
                read=True,
                region=region,
                what=what,
                request={"project": self.project, "region": region, "operation": name},
            ),
        )
        if op.error and op.error.errors:
            raise errors.from_operation(
                [(e.code, e.message) for e in op.error.errors], region=region, status=op.http_error_status_code or 0
            )
        return op

    def _until_done(self, op: Any, where: str, region: str, limit: float, poll: Callable[[str], Any]) -> Any:
        done = self.compute.Operation.Status.DONE
        deadline = time.monotonic() + limit
        while op.status != done:
            if time.monotonic() > deadline:
                raise TransientProviderError(
                    "gcp",
                    f"operation {op.name} in {where} not done after {limit:.0f} s",
                    region=region,
                    code="OPERATION_TIMEOUT",
                )
            op = poll(op.name)
        return op


class GcpProvider:
    """Compute Engine through one project; see the module docstring."""

    name = "gcp"

    def __init__(
        self,
        project: str,
        *,
        settings: GcpSettings | None = None,
        termination_action: str = "DELETE",
        bulk: bool = True,
        api: GceApi | None = None,
        storage_host: str = "",
    ):
        self.project = project
        self.settings = settings or GcpSettings()
        self.termination_action = termination_action
        self.bulk = bulk
        self.api = api or GceApi(project)
        self.storage_host = storage_host
        from providers.gcp.billing import CatalogBills
        from providers.gcp.pricing import ENDPOINT_ENV as BILLING_ENV

        self.bills = CatalogBills(
            self.settings.billing_url
            if "billing_url" in self.settings.model_fields_set
            else os.environ.get(BILLING_ENV) or self.settings.billing_url
        )

    def __repr__(self) -> str:
        where = self.api.endpoint or "compute.googleapis.com"
        return f"GcpProvider(project={self.project!r}, endpoint={where!r})"

    def now(self) -> float:
        return time.time()

    def list_offers(self, query: OfferQuery) -> list[Offer]:
        from providers.gcp.offers import list_offers

        return list_offers(self.api, query)

    def launch(self, request: LaunchRequest) -> LaunchResult:
        from providers.gcp.launch import Launcher

        if request.offer.pool.provider != self.name:
            raise ProviderError(
                self.name,
                f"pool {request.offer.pool.id} belongs to {request.offer.pool.provider}",
                code="WRONG_PROVIDER",
            )
        return Launcher(self.api, bulk=self.bulk, termination_action=self.termination_action).launch(request)

    def list_instances(self, fleet: str) -> list[Instance]:
        from providers.gcp.instances import list_fleet

        return list_fleet(self.api, fleet)

    def billed_rates(self, instances: Sequence[Instance]) -> dict[str, BilledRate]:
        """What GCE bills for these VMs of ours: composed from the Cloud Billing Catalog's SKUs of
        each one's machine type (``providers.gcp.billing``: cores, memory, GPUs; no disk or
        network); a VM that is gone is left out."""
        from providers.gcp.billing import billed_rates

        fleets = sorted({i.fleet for i in instances})
        alive = {i.id for fleet in fleets for i in self.list_instances(fleet)}
        return billed_rates(self.bills, self.api, [i for i in instances if i.id in alive], self.now())

    def terminate(self, ids: Sequence[str]) -> None:
        from providers.gcp.instances import terminate

        terminate(self.api, ids)

    def ensure_bucket(self, spec: StorageSpec) -> BucketRef:
        from providers.gcp.storage import ensure_bucket

        return ensure_bucket(self.project, spec, host=self.storage_host)

    def console_output(self, instance: Instance) -> str:
        from providers.gcp.instances import console_output

        return console_output(self.api, instance)

    # ---- TearsDown -----------------------------------------------------------------------------
    def teardown(self, fleet: str) -> list[str]:
        """Delete the compact placement policies ``fleet`` made (``providers.gcp.interconnect``);
        called by ``fleet down`` once no VM of the fleet is left. Their names."""
        from providers.gcp import interconnect

        return interconnect.remove(self.api, fleet)


def from_spec(spec: FleetSpec, settings: GcpSettings) -> GcpProvider:
    """The adapter factory ``providers.registry`` calls for ``backend: cloud``."""
    return GcpProvider(resolve_project(settings), settings=settings)
