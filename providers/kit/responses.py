"""Reading a vendor's answer: into its schema, or a ``MalformedResponseError``, never an empty result.

Providers are untrusted: a call answered "success" whose body is truncated, an HTML gateway
page, ``{}``, or of the wrong types is an error, as a 5xx is, so no caller reads it as "no
instances" (which would make ``fleet down`` record a running fleet as down, or ``fleet
rebalance`` launch beside nodes it cannot see). Every adapter reads through here:

* REST adapters that parse JSON themselves (Vast) call :func:`read_json` with a pydantic model
  of the vendor's answer (``extra`` fields allowed: vendors add fields; missing or mistyped
  required ones are the error);
* adapters on a vendor SDK (boto3, google-cloud-compute, azure-mgmt) keep the SDK's own types:
  they call :func:`check` on what the SDK parsed, and turn the SDK's parse exceptions into
  :func:`malformed`.

Every error names the provider, the call (``what``) and a short one-line :func:`excerpt` of the
body, so the message says what came back without dumping a page of HTML into a terminal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from fleet.errors import MalformedResponseError

M = TypeVar("M", bound=BaseModel)

#: Characters of a body quoted in an error.
EXCERPT_CHARS = 80
_SPACE = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def excerpt(body: Any, limit: int = EXCERPT_CHARS) -> str:
    """The start of ``body`` (bytes, text or parsed data) on one line, control characters
    escaped, at most ``limit`` characters (``...`` marks a cut)."""
    if isinstance(body, (bytes, bytearray)):
        text = bytes(body).decode("utf-8", errors="replace")
    elif isinstance(body, str):
        text = body
    else:
        try:
            text = json.dumps(body, default=str)
        except (TypeError, ValueError):
            text = repr(body)
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", _SPACE.sub(" ", text).strip())
    if not text:
        return "(empty body)"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def malformed(
    provider: str, what: str, body: Any = None, *, detail: str = "", region: str = ""
) -> MalformedResponseError:
    """The error for an answer to ``what`` that could not be read (``detail``: why, briefly)."""
    return MalformedResponseError(
        provider,
        what,
        excerpt(body) if body is not None else "",
        detail=_SPACE.sub(" ", detail).strip()[:160],
        region=region,
    )


def parse_json(body: bytes | str, *, provider: str, what: str) -> Any:
    """``body`` as JSON; an empty or unreadable body is :class:`MalformedResponseError`."""
    if not body or not (body.strip() if isinstance(body, (bytes, str)) else body):
        raise malformed(provider, what, body, detail="empty body")
    try:
        return json.loads(body)
    except ValueError as err:
        raise malformed(provider, what, body, detail=f"not JSON: {err}") from None


def check(model: type[M], data: Any, *, provider: str, what: str, body: Any = None, region: str = "") -> M:
    """``data`` (already parsed) read as ``model``; anything else is :class:`MalformedResponseError`
    naming the first field that is wrong. ``body`` is quoted instead of ``data`` when given."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        errors = err.errors()
        first: Mapping[str, Any] = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ())) or "the answer"
        raise malformed(
            provider,
            what,
            data if body is None else body,
            region=region,
            detail=f"{where}: {first.get('msg', 'invalid')}",
        ) from None


def read_json(model: type[M], body: bytes | str, *, provider: str, what: str) -> M:
    """A JSON ``body`` read as ``model`` (:func:`parse_json`, then :func:`check`)."""
    return check(model, parse_json(body, provider=provider, what=what), provider=provider, what=what, body=body)
