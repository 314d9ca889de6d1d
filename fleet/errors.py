"""The error hierarchy every layer raises and the CLI turns into one-line messages.

Expected failures (bad spec, provider refusals, a busy fleet) are ``FleetError``
subclasses; the CLI prints ``str(err)`` and exits non-zero without a traceback.
"""

from __future__ import annotations

from fleet.safetext import safe


class FleetError(Exception):
    """Base of every expected failure; ``str()`` is a complete, user-facing sentence."""


class SpecError(FleetError):
    """A fleet spec is invalid.

    ``problems`` holds one ``(path, message)`` pair per bad field, where path is the
    dotted location in the YAML document (``capacity.gpus``, ``providers.aws.regions[0]``).
    """

    def __init__(self, problems: list[tuple[str, str]], source: str | None = None):
        self.problems = problems
        self.source = source
        where = f"{source}: " if source else ""
        lines = [f"{where}{path}: {msg}" if path else f"{where}{msg}" for path, msg in problems]
        super().__init__("\n".join(lines))


class PlanError(FleetError):
    """No plan can be made at all (for example, no offer matches the spec)."""


class StateError(FleetError):
    """The state store is missing, corrupt or of an unknown schema version."""


class FleetNotFoundError(StateError):
    """The named fleet is not recorded in the state store."""


class FleetLockedError(StateError):
    """Another command holds this fleet's lock."""


class ProviderError(FleetError):
    """A provider refused or failed a request.

    ``code`` is the vendor's own error code (``InsufficientInstanceCapacity``,
    ``ZONE_RESOURCE_POOL_EXHAUSTED``...), kept for logs and for the state store.

    ``message``, ``region`` and ``code`` are provider text: they are made safe here, when the
    error is made (``fleet.safetext.safe``: one line, control characters escaped, known secrets
    and credential-shaped strings masked), so every face that shows or stores the error (``up``
    progress, ``status``, the state store, ``history --json``, logs) gets the safe text.
    """

    retryable = False
    #: Seconds the provider asked us to wait before trying again (a ``Retry-After``), when it said.
    retry_after: float | None = None

    def __init__(
        self, provider: str, message: str, *, region: str = "", code: str = "", retry_after: float | None = None
    ):
        self.provider = provider
        if retry_after is not None:
            self.retry_after = retry_after
        self.region = safe(region)
        self.code = safe(code)
        self.message = message = safe(message)
        region, code = self.region, self.code
        where = f"{provider}/{region}" if region else provider
        tag = f" [{code}]" if code else ""
        super().__init__(f"{where}: {message}{tag}")


class NoCapacityError(ProviderError):
    """The pool has no capacity now: block it for a while and re-plan the shortfall."""


class QuotaExceededError(ProviderError):
    """The account's quota in this provider+region is spent: block the region."""


class AuthError(ProviderError):
    """Credentials are missing or refused: block the provider."""


class RateLimitedError(ProviderError):
    """Throttled, and the adapter's own retries are spent."""

    retryable = True


class TransientProviderError(ProviderError):
    """A 5xx or timeout; safe to retry with the same idempotency token."""

    retryable = True


class InstanceNotFoundError(ProviderError):
    """The instance does not exist (terminate treats this as success)."""


#: HTTP status -> our error class, for a vendor answer that names no code the adapter knows
#: (every REST adapter falls back on it; each may add its own statuses).
HTTP_STATUS_ERRORS: dict[int, type[ProviderError]] = {
    401: AuthError,
    403: AuthError,
    404: InstanceNotFoundError,
    429: RateLimitedError,
    500: TransientProviderError,
    502: TransientProviderError,
    503: TransientProviderError,
    504: TransientProviderError,
}


class MalformedResponseError(ProviderError):
    """A provider answered "success" with a body that cannot be read as what was asked for:
    truncated, an HTML page, ``{}``, wrong types. Never an empty answer: the caller treats the
    provider as unreadable (as after a 5xx), so nothing is launched, ended or recorded on it.

    ``what`` names the call ("list instances"); ``excerpt`` is a short, one-line piece of the
    body (``providers.kit.responses.excerpt``). Retryable: a launch whose answer could not be
    read may have created something, so it stays replayable with its own token.
    """

    retryable = True

    def __init__(self, provider: str, what: str, excerpt: str = "", *, detail: str = "", region: str = ""):
        self.what = what
        self.excerpt = excerpt
        reason = f" ({detail})" if detail else ""
        body = f": {excerpt}" if excerpt else ""
        super().__init__(
            provider, f"{what}: the answer could not be read{reason}{body}", region=region, code="malformed-response"
        )


#: Exception class -> error kind, the word ``LaunchResult.error_kind`` and the executor use (the
#: first match wins, so subclasses come before their bases).
ERROR_KINDS: tuple[tuple[type[ProviderError], str], ...] = (
    (NoCapacityError, "capacity"),
    (QuotaExceededError, "quota"),
    (AuthError, "auth"),
    (RateLimitedError, "rate-limit"),
    (TransientProviderError, "transient"),
    (MalformedResponseError, "malformed"),
)
#: Kinds whose launch stays replayable with the same token on the next run (an answer that could
#: not be read may still have created something: the token finds it).
RETRYABLE_KINDS = frozenset({"rate-limit", "transient", "malformed"})


def error_kind(err: ProviderError) -> str:
    """The error kind of ``err`` (:data:`ERROR_KINDS`), ``"error"`` for any other refusal."""
    for cls, kind in ERROR_KINDS:
        if isinstance(err, cls):
            return kind
    return "error"
