"""Provider text made safe to print and store: one line, control characters escaped, secrets scrubbed.

Providers are untrusted: an error message may echo our ``Authorization`` header or a key, and it
may carry terminal escape sequences (an OSC title change, a clear-screen) or a newline that forges
a line of our own output. Every face (the CLI's tables, errors, progress and JSON; the state
store; logs) shows provider text only through :func:`safe`.

* :func:`escape` returns one line: C0 and C1 control characters (ESC, CSI, ``\\r``, ``\\n``,
  ``\\t``...), DEL, the Unicode line/paragraph separators and the bidi overrides and isolates are
  written as ``\\x1b``, ``\\n``, ``\\u202e``. Printable text, backslashes included, is kept, so
  escaping twice changes nothing.
* :func:`scrub` replaces with ``***`` every known secret value (the process-wide registry below,
  plus ``known``) and every credential-shaped string: ``Bearer``/``Basic``/``Token`` credentials,
  AWS access key ids (``AKIA``/``ASIA``...) and secret-key-shaped strings, JWTs, Google OAuth
  tokens, GitHub tokens, PEM private keys, SAS ``sig=`` parameters, and the value in any
  ``key=value`` / ``"key": "value"`` whose key names a secret (``AccountKey=``, ``password:``,
  ``token=``) or whose value is a long base64/hex token.

The registry (:func:`register_secret`, :func:`register_environ`) is thread-safe; adapters register
the credentials they hold, ``fleet.secrets.resolve_env`` the values it resolves, and the CLI the
secret-named variables of its own environment. A password in a URL (``postgresql://u:pw@host``)
is masked by shape. Values shorter than :data:`MIN_SECRET_LENGTH` are not
registered (they would scrub ordinary words).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
#: Shorter registered values are ignored: "abc" as a password would mask every "abc" in a message.
MIN_SECRET_LENGTH = 6

#: Variable names that say their value is a secret (``fleet.secrets`` refuses literals under them).
SECRET_NAME_RE = re.compile(
    r"SECRET|PASSWORD|PASSWD|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CONNECTION_?STRING|CREDENTIAL|SAS_?KEY"
    r"|ACCOUNT_?KEY",
    re.IGNORECASE,
)

_lock = threading.Lock()
_known: set[str] = set()

# ---- escaping -------------------------------------------------------------------------------
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")


def _escaped(match: re.Match[str]) -> str:
    ch = match.group(0)
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: Any) -> str:
    """``text`` (``str()`` of it) as one line with every control character written out."""
    return _UNSAFE.sub(_escaped, text if isinstance(text, str) else str(text))


# ---- scrubbing ------------------------------------------------------------------------------
_KEYISH = (
    r"(?:[A-Za-z0-9_.-]*(?:key|secret|token|passw(?:or)?d|pwd|signature|credentials?|authorization)"
    r"[A-Za-z0-9_.-]*|sig)"
)
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.S), MASK),
    (re.compile(r"(?i)(\bauthorization\"?\s*[:=]\s*\"?)(?!\*\*\*)([A-Za-z]+\s+)?[^\s\"',;]+"), rf"\1\2{MASK}"),
    (re.compile(r"\b([Bb]earer\s+)(?!\*\*\*)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{MASK}"),
    (re.compile(r"\b(Basic\s+)(?=[A-Za-z+/]*[0-9=])[A-Za-z0-9+/]{8,}={0,2}"), rf"\1{MASK}"),
    (re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+@"), rf"\1{MASK}@"),  # URL password
    (re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), MASK),  # JWT
    (re.compile(r"\bya29\.[A-Za-z0-9._-]{10,}"), MASK),  # Google OAuth
    (re.compile(r"\b(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,}"), MASK),  # GitHub
    (re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA|AGPA|ANPA|ANVA|AIPA|ABIA|ACCA)[A-Z0-9]{16}\b"), MASK),  # AWS key ids
    (re.compile(r"([?&;\s]sig=)[^&\s\"'<>]+", re.I), rf"\1{MASK}"),  # SAS signature
    # "key": "value", key=value, key: value where the key names a secret
    (
        re.compile(rf"(?i)(\"?\b{_KEYISH}\"?\s*[=:]\s*\"?)(?!\*\*\*|(?:[Bb]earer|Basic)\b)([^\s\"',;&}}]{{4,}})"),
        rf"\1{MASK}",
    ),
    # key=value where the value is a long base64/hex token, whatever the key's name
    (re.compile(r"(\b[A-Za-z_][A-Za-z0-9_.-]*\s*=\s*\"?)[A-Za-z0-9+/_-]{32,}={0,2}"), rf"\1{MASK}"),
)
#: An AWS secret access key: 40 characters of base64 with upper, lower case and a digit or ``/+``.
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")


def _secret_shaped(match: re.Match[str]) -> str:
    word = match.group(0)
    mixed = (
        any(c.isupper() for c in word)
        and any(c.islower() for c in word)
        and any(c.isdigit() or c in "/+" for c in word)
    )
    return MASK if mixed else word


def register_secret(value: str | None) -> None:
    """Remember ``value`` as a secret that :func:`scrub` masks everywhere from now on."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _known.add(value)


def register_environ(environ: Mapping[str, str]) -> None:
    """Register the values of every variable in ``environ`` whose name says it holds a secret
    (:data:`SECRET_NAME_RE`: ``AWS_SECRET_ACCESS_KEY``, ``VAST_API_KEY``, ``ARM_CLIENT_SECRET``,
    ``AZURE_STORAGE_CONNECTION_STRING``...). Settings such as ``AWS_DEFAULT_REGION`` are not
    secrets and are left readable."""
    for name, value in environ.items():
        if SECRET_NAME_RE.search(name):
            register_secret(value)


def known_secrets() -> frozenset[str]:
    with _lock:
        return frozenset(_known)


def scrub(text: Any, known: Iterable[str] = ()) -> str:
    """``text`` with every known secret value and credential-shaped string replaced by ``***``."""
    out = text if isinstance(text, str) else str(text)
    values = sorted(
        {v for v in (*known_secrets(), *known) if v and len(v) >= MIN_SECRET_LENGTH}, key=len, reverse=True
    )  # longest first: a key that contains another is masked whole
    for value in values:
        if value in out:
            out = out.replace(value, MASK)
    for pattern, replacement in _PATTERNS:
        out = pattern.sub(replacement, out)
    return _AWS_SECRET.sub(_secret_shaped, out)


def scrub_known(text: str) -> str:
    """``text`` with only the registered secret values masked (no shape rules: for our own output,
    such as JSON documents, where a shape rule could mask a legitimate identifier)."""
    for value in sorted(known_secrets(), key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    return text


def safe(text: Any, known: Iterable[str] = ()) -> str:
    """Provider text ready to print or store: :func:`scrub` then :func:`escape`."""
    return escape(scrub(text, known))


def safe_data(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with :func:`safe` applied to every string in it."""
    if isinstance(value, str):
        return safe(value)
    if isinstance(value, Mapping):
        return {k: safe_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [safe_data(v) for v in value]
    return value
