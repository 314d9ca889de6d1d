"""The Azure Resource Manager clients the adapter uses, and one way to call them.

``Arm`` builds the azure-mgmt compute, network, resource and storage clients for one subscription.
``$SPOTFLEET_AZURE_ARM_ENDPOINT`` points them at another ARM endpoint (the test fake); a plain
``http://`` endpoint on a loopback address gets a no-op authentication policy (the SDK's bearer
policy refuses plain http, and a local fake has no Entra ID), anything else authenticates with
``DefaultAzureCredential`` (azure-identity). :meth:`Arm.call` runs one SDK call, maps Azure
errors to ours (``providers.azure.errors``) and absorbs throttling: a 429 is retried after the
``Retry-After`` it names (capped), up to ``throttle_retries`` times, then RateLimitedError. The
SDK's own retry policy is switched off, so a 5xx reaches the caller (the executor retries).
An answer the SDK cannot read (truncated, HTML, wrong types) is MalformedResponseError; list calls
go through :meth:`Arm.listing`, which checks every page against :class:`ArmPage` before the SDK
reads it (the SDK reads ``{}`` as an empty list). The SDK (azure-core, azure-mgmt-*, azure-identity)
is imported where a client is built or a call made, not with this module.
"""

from __future__ import annotations

import ipaddress
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from json import JSONDecodeError
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field

from fleet.errors import AuthError, RateLimitedError
from providers.azure.errors import RULES, THROTTLED, to_error
from providers.kit.errors import retry_after_seconds
from providers.kit.responses import malformed, read_json
from providers.kit.retry import Retrier

if TYPE_CHECKING:
    from azure.core.exceptions import HttpResponseError

ENDPOINT_ENV = "SPOTFLEET_AZURE_ARM_ENDPOINT"
SUBSCRIPTION_ENV = "AZURE_SUBSCRIPTION_ID"
DEFAULT_ENDPOINT = "https://management.azure.com"

T = TypeVar("T")


def wire(model: Any) -> dict[str, Any]:
    """An SDK model (or a dict) in ARM wire format."""
    return model.as_dict() if hasattr(model, "as_dict") else dict(model or {})


class _Resource(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)


class ArmPage(BaseModel):
    """One page of an ARM list answer: ``value`` (each item a named resource), ``nextLink``."""

    model_config = ConfigDict(extra="allow")

    value: list[_Resource]
    nextLink: str | None = None


def is_local(endpoint: str) -> bool:
    """True for a plain-http endpoint on a loopback address (a test fake)."""
    url = urlparse(endpoint)
    if url.scheme != "http":
        return False
    host = url.hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _LocalToken:
    """A credential for a loopback fake: never sent (the auth policy is a no-op there)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken("local", int(time.time()) + 3600)


class Arm:
    """Clients for ``subscription`` at ``endpoint``; ``polling_interval`` seconds between LRO polls."""

    def __init__(
        self,
        subscription: str,
        endpoint: str = "",
        *,
        credential: Any = None,
        polling_interval: float = 2.0,
        throttle_retries: int = 4,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.subscription = subscription
        self.endpoint = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
        self.polling_interval = polling_interval
        self.retrier = Retrier(replace(RULES, max_attempts=throttle_retries + 1), sleep=sleep)
        local = is_local(self.endpoint)
        if credential is None:
            if local:
                credential = _LocalToken()
            else:
                from azure.identity import DefaultAzureCredential

                credential = DefaultAzureCredential()
        self.credential = credential
        self._options: dict[str, Any] = {"polling_interval": polling_interval, "retry_total": 0}
        if local:
            from azure.core.pipeline.policies import SansIOHTTPPolicy

            self._options["authentication_policy"] = SansIOHTTPPolicy()
        self._clients: dict[str, Any] = {}

    @classmethod
    def from_env(cls, subscription: str = "", environ: Mapping[str, str] | None = None, **kwargs: Any) -> Arm:
        """Subscription from the argument or ``$AZURE_SUBSCRIPTION_ID``; endpoint from the override."""
        env = os.environ if environ is None else environ
        sub = subscription or env.get(SUBSCRIPTION_ENV, "")
        if not sub:
            raise AuthError(
                "azure",
                f"no subscription: set providers.azure.subscription_id in the spec or ${SUBSCRIPTION_ENV}",
                code="no-subscription",
            )
        if "polling_interval" not in kwargs and env.get("SPOTFLEET_AZURE_POLLING_INTERVAL"):
            kwargs["polling_interval"] = float(env["SPOTFLEET_AZURE_POLLING_INTERVAL"])
        return cls(sub, env.get(ENDPOINT_ENV, ""), **kwargs)

    def __repr__(self) -> str:
        return f"Arm({self.endpoint}, subscription={self.subscription})"

    def _client(self, kind: str) -> Any:
        if kind not in self._clients:
            if kind == "compute":
                from azure.mgmt.compute import ComputeManagementClient as C
            elif kind == "network":
                from azure.mgmt.network import NetworkManagementClient as C
            elif kind == "storage":
                from azure.mgmt.storage import StorageManagementClient as C
            else:
                from azure.mgmt.resource.resources import ResourceManagementClient as C
            self._clients[kind] = C(self.credential, self.subscription, base_url=self.endpoint, **self._options)
        return self._clients[kind]

    @property
    def compute(self) -> Any:
        return self._client("compute")

    @property
    def network(self) -> Any:
        return self._client("network")

    @property
    def resources(self) -> Any:
        return self._client("resource")

    @property
    def storage(self) -> Any:
        return self._client("storage")

    def call(self, fn: Callable[[], T], what: str) -> T:
        """``fn()`` with throttles (HTTP 429) retried after their Retry-After by the kit's engine
        (``providers.azure.errors.RULES``); Azure errors become ours."""
        from azure.core.exceptions import AzureError, DecodeError, DeserializationError, HttpResponseError

        def once() -> T:
            try:
                return fn()
            except DecodeError as err:  # a 2xx body that is not JSON (an HttpResponseError too)
                raise malformed("azure", what, _body(err), detail=str(err).split("\n", 1)[0]) from None
            except (DeserializationError, JSONDecodeError) as err:  # JSON of the wrong shape, or none
                raise malformed("azure", what, detail=f"{type(err).__name__}: {err}") from None
            except HttpResponseError as err:
                if err.status_code != 429:
                    raise to_error(err, what) from err
                headers = getattr(err.response, "headers", None) or {}
                raise RateLimitedError(
                    "azure",
                    f"{what}: throttled (HTTP 429)",
                    code=THROTTLED,
                    retry_after=retry_after_seconds(headers.get("Retry-After")),
                ) from err
            except AzureError as err:
                raise to_error(err, what) from err

        return self.retrier.call(once, idempotent=False)

    def listing(self, list_call: Callable[..., Iterable[Any]], what: str) -> list[dict[str, Any]]:
        """Every item of the SDK list call ``list_call(**options)`` in wire format, through
        :meth:`call`; each page's body is read as :class:`ArmPage` first (``options`` carries the
        hook that does it), so a broken page is MalformedResponseError, never fewer items."""

        def check_page(pipeline_response: Any) -> None:
            http = pipeline_response.http_response
            if 200 <= http.status_code < 300:
                read_json(ArmPage, http.body(), provider="azure", what=what)

        return self.call(lambda: [wire(v) for v in list_call(raw_response_hook=check_page)], what)


def _body(err: HttpResponseError) -> bytes | None:
    """The body of the answer ``err`` came from, where the SDK kept it."""
    try:
        return err.response.body() if err.response is not None else None
    except Exception:  # a streamed answer that is gone: the message says enough
        return None
