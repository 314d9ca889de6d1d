"""One error-table type for every provider: vendor code or HTTP status -> our error class.

Each adapter declares one :class:`ErrorTable` in ``providers/<name>/errors.py``::

    TABLE = ErrorTable("vast", codes={"no_such_ask": NoCapacityError, ...}, statuses={410: NoCapacityError})
    raise TABLE.error("create on ask 7: no such ask", code="no_such_ask", status=404)

A code the table names decides the class; else the status (the table's own statuses over the
shared ``fleet.errors.HTTP_STATUS_ERRORS``); else ``TransientProviderError`` for a 5xx and
``ProviderError`` for anything else. The error's ``code`` is the vendor code, or ``HTTP<status>``
when the vendor named none. Arguments are keyword-only so every adapter passes them the same
way; the message is provider text and is made safe by ``ProviderError`` itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fleet.errors import HTTP_STATUS_ERRORS, ProviderError, TransientProviderError


@dataclass(frozen=True)
class ErrorTable:
    """One provider's error table (see the module doc)."""

    provider: str
    codes: Mapping[str, type[ProviderError]] = field(default_factory=dict)
    statuses: Mapping[int, type[ProviderError]] = field(default_factory=dict)

    def error_class(self, *, code: str = "", status: int | None = None) -> type[ProviderError]:
        """The class for an answer with vendor ``code`` (``""``: none) and HTTP ``status``."""
        if code and code in self.codes:
            return self.codes[code]
        if status is not None:
            if status in self.statuses:
                return self.statuses[status]
            if status in HTTP_STATUS_ERRORS:
                return HTTP_STATUS_ERRORS[status]
            if status >= 500:
                return TransientProviderError
        return ProviderError

    def error(
        self,
        message: str,
        *,
        code: str = "",
        status: int | None = None,
        region: str = "",
        retry_after: float | None = None,
        limit: int = 400,
    ) -> ProviderError:
        """The exception for a failure (``message`` is cut to ``limit`` characters)."""
        cls = self.error_class(code=code, status=status)
        tag = code or (f"HTTP{status}" if status is not None else "")
        return cls(self.provider, message[:limit], region=region, code=tag, retry_after=retry_after)


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header's seconds (``None`` when absent or an HTTP date we do not parse)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
