"""The OCI client: the ``oci`` SDK's Compute and Identity clients, every answer read strictly.

``OciApi(config, endpoint=...)`` makes the SDK clients when first used (importing ``oci`` takes a
second). ``config`` is the SDK's configuration dict (``user``, ``tenancy``, ``fingerprint``,
``region``, ``key_file`` or ``key_content``: https://docs.oracle.com/iaas/Content/API/Concepts/sdkconfig.htm),
usually read by :func:`load_config` from ``~/.oci/config``; the SDK signs every request with that
API key. ``endpoint`` (or ``$SPOTFLEET_OCI_ENDPOINT``) replaces both services' hosts, for the fake.
Contract:

* the SDK is asked for the raw JSON (``skip_deserialization``) and each answer is read into the
  schemas of ``providers.oci.schemas``: a truncated body, an HTML page, ``{}`` where a list
  belongs or wrong types are MalformedResponseError (``providers.kit.responses``), never an
  empty list (the SDK itself would read ``{}`` as no instances);
* failures (``oci.exceptions.ServiceError`` and transport errors) become the classes of
  ``providers.oci.errors``; the SDK's own retries and circuit breaker are off, the one retry
  engine decides (``providers.oci.errors.RULES``): throttling always, 5xx only for reads (a launch
  that failed so may have created its instance; the caller's next launch finds it by tag);
* list calls follow ``opc-next-page`` to the end; ``calls`` counts HTTP requests (benchmarks);
* the key never appears in a message, a log line or ``repr``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from fleet.errors import AuthError, ProviderError
from fleet.safetext import register_secret
from providers.kit.responses import check, malformed
from providers.kit.retry import Retrier
from providers.oci.errors import RULES, from_service_error, from_transport_error
from providers.oci.schemas import AvailabilityDomain, InstanceRow, ShapeRow

if TYPE_CHECKING:
    import oci

ENDPOINT_ENV = "SPOTFLEET_OCI_ENDPOINT"
CONFIG_ENV = "SPOTFLEET_OCI_CONFIG"
M = TypeVar("M", bound=BaseModel)
PAGE_LIMIT = 100
MAX_PAGES = 1000
API_VERSION = "/20160918"


def load_config(config_file: str = "", profile: str = "", environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The SDK configuration of ``profile`` (``$OCI_CLI_PROFILE`` or ``DEFAULT``) in ``config_file``
    (``$SPOTFLEET_OCI_CONFIG``, ``$OCI_CLI_CONFIG_FILE`` or ``~/.oci/config``), validated.
    AuthError (code ``no-config``) when it is missing or incomplete, naming the fix."""
    import oci

    env = os.environ if environ is None else environ
    path = config_file or env.get(CONFIG_ENV) or env.get("OCI_CLI_CONFIG_FILE") or "~/.oci/config"
    name = profile or env.get("OCI_CLI_PROFILE") or "DEFAULT"
    try:
        config = oci.config.from_file(os.path.expanduser(path), name)
        oci.config.validate_config(config)
    except (
        oci.exceptions.ConfigFileNotFound,
        oci.exceptions.ProfileNotFound,
        oci.exceptions.InvalidConfig,
        oci.exceptions.InvalidKeyFilePath,
    ) as err:
        raise AuthError(
            "oci",
            f"no usable OCI API key in {path} (profile {name}): {type(err).__name__}; "
            "create one with `oci setup config` or set providers.oci.config_file/profile",
            code="no-config",
        ) from None
    return dict(config)


class OciApi:
    """The Compute and Identity clients of one tenancy and region (thread-safe: each call makes
    its own request through the SDK's session)."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        config_file: str = "",
        profile: str = "",
        region: str = "",
        endpoint: str | None = None,
        retrier: Retrier | None = None,
        timeout: float = 30.0,
    ):
        """``config`` as the SDK takes it, or ``None`` to read ``config_file``/``profile`` (see
        :func:`load_config`) when first needed, so building the adapter imports no SDK; ``region``
        overrides the config's."""
        self._config: dict[str, Any] | None = dict(config) if config is not None else None
        self._source = (config_file, profile)
        self._region = region
        self.endpoint = (endpoint if endpoint is not None else os.environ.get(ENDPOINT_ENV, "")).rstrip("/")
        self.timeout = timeout
        self._retrier = retrier if retrier is not None else Retrier(RULES)
        self._lock = threading.Lock()
        self._compute: Any = None
        self._identity: Any = None
        self.calls = 0

    @property
    def config(self) -> dict[str, Any]:
        """The SDK configuration (read on first use; AuthError when there is none)."""
        with self._lock:
            if self._config is None:
                self._config = load_config(*self._source)
            if self._region:
                self._config["region"] = self._region
            for secret in ("key_content", "pass_phrase"):
                if self._config.get(secret):
                    register_secret(str(self._config[secret]))
            return self._config

    @property
    def region(self) -> str:
        return str(self.config.get("region") or "")

    @property
    def tenancy(self) -> str:
        return str(self.config.get("tenancy") or "")

    def __repr__(self) -> str:
        return f"OciApi(region={self._region or 'from config'!r}, endpoint={self.endpoint or 'default'!r})"

    # ---- clients ---------------------------------------------------------------------------
    def _clients(self) -> tuple[Any, Any]:
        config = self.config
        with self._lock:
            if self._compute is None:
                import oci

                common: dict[str, Any] = {
                    "retry_strategy": oci.retry.NoneRetryStrategy(),
                    "skip_deserialization": True,
                    "circuit_breaker_strategy": oci.circuit_breaker.NoCircuitBreakerStrategy(),
                    "timeout": (10.0, self.timeout),
                }
                extra = {"service_endpoint": self.endpoint + API_VERSION} if self.endpoint else {}
                try:
                    self._compute = oci.core.ComputeClient(config, **common, **extra)
                    self._identity = oci.identity.IdentityClient(config, **common, **extra)
                except (oci.exceptions.InvalidConfig, oci.exceptions.InvalidPrivateKey, ValueError) as err:
                    raise AuthError(
                        "oci", f"the OCI API key configuration is not usable: {type(err).__name__}", code="bad-config"
                    ) from None
            return self._compute, self._identity

    def _call(self, what: str, fn: Callable[[], Any], *, idempotent: bool) -> Any:
        """One SDK call under the retry engine; the SDK's Response."""
        import oci

        def attempt() -> Any:
            with self._lock:
                self.calls += 1
            try:
                return fn()
            except oci.exceptions.ServiceError as err:
                raise from_service_error(err, what, self._where()) from None
            except (oci.exceptions.RequestException, oci.exceptions.ConnectTimeout, oci.exceptions.ClientError) as err:
                raise from_transport_error(err, what, self._where()) from None

        return self._retrier.call(attempt, idempotent=idempotent)

    def _where(self) -> str:
        return str((self._config or {}).get("region") or self._region)

    def _read(self, model: type[M], data: Any, what: str) -> M:
        return check(model, data, provider="oci", what=what, region=self.region)

    def _pages(self, model: type[M], what: str, fn: Callable[..., Any], **kwargs: Any) -> list[M]:
        """Every row of a list call, following ``opc-next-page``; each page must be a JSON list."""
        rows: list[M] = []
        page: str | None = None
        for _ in range(MAX_PAGES):
            args = {**kwargs, "limit": PAGE_LIMIT, **({"page": page} if page else {})}
            resp = self._call(what, lambda: fn(**args), idempotent=True)
            if not isinstance(resp.data, list):
                raise malformed("oci", what, resp.data, detail="not a JSON list", region=self.region)
            rows += [self._read(model, row, what) for row in resp.data]
            page = resp.headers.get("opc-next-page")
            if not page:
                return rows
        raise ProviderError("oci", f"{what}: paging did not end", region=self.region, code="paging")

    # ---- the calls -------------------------------------------------------------------------
    def availability_domains(self, compartment_id: str) -> list[AvailabilityDomain]:
        """The region's availability domains (OCI's zones)."""
        _, identity = self._clients()
        what = "list availability domains"
        resp = self._call(what, lambda: identity.list_availability_domains(compartment_id), idempotent=True)
        if not isinstance(resp.data, list):
            raise malformed("oci", what, resp.data, detail="not a JSON list", region=self.region)
        return [self._read(AvailabilityDomain, row, what) for row in resp.data]

    def shapes(self, compartment_id: str, availability_domain: str = "") -> list[ShapeRow]:
        """The shapes the compartment can launch (in ``availability_domain`` when given)."""
        compute, _ = self._clients()
        kwargs = {"availability_domain": availability_domain} if availability_domain else {}
        return self._pages(
            ShapeRow,
            f"list shapes{' in ' + availability_domain if availability_domain else ''}",
            compute.list_shapes,
            compartment_id=compartment_id,
            **kwargs,
        )

    def instances(self, compartment_id: str) -> list[InstanceRow]:
        """Every instance of the compartment, terminated ones OCI still lists included."""
        compute, _ = self._clients()
        return self._pages(InstanceRow, "list instances", compute.list_instances, compartment_id=compartment_id)

    def instance(self, instance_id: str) -> InstanceRow:
        compute, _ = self._clients()
        what = f"get instance {instance_id}"
        resp = self._call(what, lambda: compute.get_instance(instance_id), idempotent=True)
        return self._read(InstanceRow, resp.data, what)

    def launch(self, details: oci.core.models.LaunchInstanceDetails, retry_token: str) -> InstanceRow:
        """LaunchInstance with ``retry_token`` (``opc-retry-token``, at most 64 characters; a repeat with
        the same token and body answers the first instance). Throttling is retried; a 5xx is raised (it
        may have created the instance: the caller's next launch finds it by its tags)."""
        compute, _ = self._clients()
        what = f"launch {details.shape} in {details.availability_domain}"
        resp = self._call(what, lambda: compute.launch_instance(details, opc_retry_token=retry_token), idempotent=False)
        return self._read(InstanceRow, resp.data, what)

    def terminate(self, instance_id: str) -> None:
        """TerminateInstance with its boot volume (``preserveBootVolume=false``); InstanceNotFoundError
        when OCI does not know the id."""
        compute, _ = self._clients()
        self._call(
            f"terminate {instance_id}",
            lambda: compute.terminate_instance(instance_id, preserve_boot_volume=False),
            idempotent=True,
        )
