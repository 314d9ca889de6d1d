"""AWS clients for the adapter, and the one place a call is made, retried and translated.

Credentials come from boto3's standard chain (environment, profiles, SSO, instance roles);
they are never printed, logged or stored. boto3 honours ``AWS_ENDPOINT_URL`` (and the
per-service ``AWS_ENDPOINT_URL_<SERVICE>``), so pointing it at an emulator such as a moto
server sends every client there. boto3 is imported when the first call needs a client or the
credential chain (importing it takes about a second), not when the adapter is built. botocore's own retries are switched off: :meth:`Aws.call`
retries throttling by the kit's engine (``providers.aws.errors.RULES``) and then raises ``RateLimitedError``; every other
failure becomes the class :mod:`providers.aws.errors` names, at once. An answer botocore cannot
parse (truncated XML, an HTML page: its ``ResponseParserError`` is no ``BotoCoreError``), or a page
of a list call without the list, is ``MalformedResponseError`` (``providers.kit.responses``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fleet.errors import ProviderError
from fleet.safetext import register_secret
from providers.aws.errors import RULES, to_error
from providers.kit.responses import malformed
from providers.kit.retry import Retrier

if TYPE_CHECKING:
    from botocore.exceptions import ClientError

#: Seconds slept before each retry of a throttled call (full jitter below each value).
RETRY_DELAYS = RULES.delays or ()
#: botocore's client settings (``botocore.config.Config`` keywords).
_CONFIG = dict(
    retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=10, read_timeout=60, max_pool_connections=32
)


class Aws:
    """Thread-safe boto3 clients per (service, region), with :meth:`call` as the only door.

    ``calls`` counts API requests sent (retries included), for benchmarks and logs.
    """

    def __init__(
        self,
        *,
        profile: str | None = None,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self._profile = profile
        self._boto: Any = None  # the boto3 Session, made on first use
        self._config: Any = None
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._session_lock = threading.Lock()
        self.retrier = Retrier(RULES.with_delays(tuple(retry_delays)), sleep=sleep)
        self.calls = 0
        self._has_credentials: bool | None = None

    @property
    def _session(self) -> Any:
        """The boto3 Session (boto3 imported and the session made on first use)."""
        with self._session_lock:
            if self._boto is None:
                import boto3
                from botocore.config import Config

                self._config = Config(**_CONFIG)
                self._boto = boto3.session.Session(profile_name=self._profile)
            return self._boto

    @property
    def default_region(self) -> str:
        return self._session.region_name or "us-east-1"

    def client(self, service: str, region: str) -> Any:
        key = (service, region)
        session = self._session
        with self._lock:
            if key not in self._clients:
                self._clients[key] = session.client(service, region_name=region, config=self._config)
            return self._clients[key]

    def require_credentials(self) -> None:
        """Raise AuthError at once when the credential chain finds nothing (looked up once)."""
        session = self._session
        with self._lock:
            if self._has_credentials is None:
                found = session.get_credentials()
                self._has_credentials = found is not None
                if found is not None:  # masked in any provider text that echoes them (fleet.safetext)
                    frozen = found.get_frozen_credentials()
                    register_secret(frozen.secret_key)
                    register_secret(frozen.token)
            found = self._has_credentials
        if not found:
            raise to_error(
                "NoCredentials",
                "no AWS credentials found (environment, ~/.aws, SSO or an instance "
                "role); run `aws configure` or set AWS_PROFILE",
            )

    def call(self, service: str, region: str, operation: str, **params: Any) -> dict[str, Any]:
        """``client.<operation>(**params)``; raises the mapped ProviderError on failure."""
        from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, NoCredentialsError
        from botocore.parsers import ResponseParserError

        self.require_credentials()
        method = getattr(self.client(service, region), operation)

        def once() -> dict[str, Any]:
            with self._lock:
                self.calls += 1
            try:
                return method(**params)
            except ClientError as err:
                code, message = _code_message(err)
                raise to_error(code, f"{operation}: {message}", region=region) from None
            except NoCredentialsError:
                with self._lock:
                    self._has_credentials = False
                self.require_credentials()
                raise AssertionError("require_credentials raises once none are found") from None
            except EndpointConnectionError as err:
                raise to_error("EndpointConnectionError", f"{operation}: {err}", region=region) from None
            except BotoCoreError as err:
                raise ProviderError("aws", f"{operation}: {err}", region=region, code=type(err).__name__) from None
            except ResponseParserError as err:  # its text: what went wrong, then the body
                why, _, body = str(err).partition("\n")
                raise malformed("aws", operation, body or None, detail=why, region=region) from None

        return self.retrier.call(once, idempotent=False)

    def pages(self, service: str, region: str, operation: str, key: str, **params: Any) -> list[Any]:
        """Every item under ``key`` across the pages of a paginated call (NextToken); a page
        without ``key`` (AWS always sends the list, empty or not) is MalformedResponseError."""
        out: list[Any] = []
        token = None
        while True:
            page = self.call(service, region, operation, **params, **({"NextToken": token} if token else {}))
            if not isinstance(page.get(key), list):
                raise malformed(
                    "aws",
                    operation,
                    sorted(k for k in page if k != "ResponseMetadata"),
                    region=region,
                    detail=f"the answer has no {key} list",
                )
            out.extend(page[key])
            token = page.get("NextToken")
            if not token:
                return out


def _code_message(err: ClientError) -> tuple[str, str]:
    info = err.response.get("Error", {})
    code = str(info.get("Code") or err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "Unknown"))
    if code.isdigit():  # an HTTP status with no AWS code (an HTML 500 page)
        code = "InternalError" if int(code) >= 500 else code
    return code, str(info.get("Message") or code)
