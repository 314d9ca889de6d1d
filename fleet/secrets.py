"""Secrets in ``node.env``: referenced by name in the spec, resolved only when nodes are launched.

A spec never holds a secret's value. It writes ``${env:NAME}`` (the whole value, or inside
one such as ``Bearer ${env:HF_TOKEN}``); ``fleet up`` reads ``NAME`` from its own
environment and passes the result to the nodes only. What the spec, the state store,
``fleet spec check --json`` and every log or error keep is the reference text.

``check_env(env)`` is the spec-time rule: references must be well formed, and a variable
whose name says it is a secret (``*SECRET*``, ``*PASSWORD*``, ``*TOKEN*``, ``*API_KEY*``,
``*ACCESS_KEY*``, ``*CONNECTION_STRING*``, ``*CREDENTIAL*``...) must be a reference.
``resolve_env(env, environ)`` returns the values; a variable that is not set is a
``FleetError`` naming it. ``NodeConfig.env`` (which holds them at launch) is left out of reprs.
Every value it resolves is registered with ``fleet.safetext``, so provider text that echoes
it is masked wherever it is printed or stored.

The operator's own cloud credentials are not forwarded by accident: a reference to a
*credential variable* (:data:`CREDENTIAL_VARIABLES`: ``AWS_*``, ``GOOGLE_*``, ``GCLOUD_*``,
``CLOUDSDK_*``, ``AZURE_*``, ``ARM_*``, ``MSI_*``, ``IDENTITY_ENDPOINT``/``IDENTITY_HEADER``,
``VAST_*``, ``SPOTFLEET_*`` (the state store and spotfleet's own settings), ``PG*``,
``DATABASE_URL``, ``GITHUB_TOKEN``/``GH_TOKEN``, ``KUBECONFIG``) is refused unless the spec
names it in ``node.forward_credentials`` (:func:`check_forwarding`). A spec from someone else
then cannot take the keys of whoever runs it, whatever the node variable is called.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from fleet.errors import FleetError
from fleet.safetext import SECRET_NAME_RE, register_secret

REF_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
REF_RE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_ANY_REF = re.compile(r"\$\{env:[^}]*\}?")
__all__ = [
    "CREDENTIAL_VARIABLES",
    "REF_NAME_RE",
    "REF_RE",
    "SECRET_NAME_RE",
    "check_env",
    "check_forwarding",
    "is_credential_variable",
    "references",
    "resolve_env",
]

#: Variables that hold the operator's credentials (or say where they are): a prefix ends in ``_``
#: or ``*``, anything else is a whole name. Referenced from ``node.env``/``head.env`` only when
#: ``node.forward_credentials`` names them.
CREDENTIAL_VARIABLES: tuple[str, ...] = (
    "AWS_",
    "GOOGLE_",
    "GCLOUD_",
    "CLOUDSDK_",
    "AZURE_",
    "ARM_",
    "MSI_",
    "IDENTITY_ENDPOINT",
    "IDENTITY_HEADER",
    "VAST_",
    "SPOTFLEET_",
    "PG*",
    "DATABASE_URL",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "KUBECONFIG",
)


def is_credential_variable(name: str) -> bool:
    """Whether ``name`` is one of :data:`CREDENTIAL_VARIABLES` (case-insensitive)."""
    upper = name.upper()
    return any(upper.startswith(p.rstrip("*")) if p.endswith(("_", "*")) else upper == p for p in CREDENTIAL_VARIABLES)


def references(env: Mapping[str, str]) -> dict[str, list[str]]:
    """``{node variable: [referenced variables]}`` for every ``${env:NAME}`` in ``env``."""
    return {name: [m.group(1) for m in REF_RE.finditer(value)] for name, value in env.items() if REF_RE.search(value)}


def check_forwarding(env: Mapping[str, str], allowed: Sequence[str], field: str) -> None:
    """Raise ``ValueError`` when ``env`` (the spec's ``field``, such as ``node.env``) refers to a
    credential variable that ``allowed`` (``node.forward_credentials``) does not name."""
    for name, refs in references(env).items():
        for ref in refs:
            if is_credential_variable(ref) and ref not in allowed:
                raise ValueError(
                    f"{field}.{name} refers to ${{env:{ref}}}, a credential of the machine that runs `fleet up`, "
                    f"which would reach every node; remove it, or add {ref} to node.forward_credentials to "
                    "send it on purpose"
                )


def check_env(env: Mapping[str, str]) -> None:
    """Raise ``ValueError`` (one sentence naming the variable and the fix) when ``env`` breaks the rule above."""
    for name, value in env.items():
        bad = [m.group(0) for m in _ANY_REF.finditer(value) if not REF_RE.fullmatch(m.group(0))]
        if bad:
            raise ValueError(f"{name}: {bad[0][:40]!r} is not a reference; write ${{env:VARIABLE_NAME}}")
        if SECRET_NAME_RE.search(name) and value and not REF_RE.search(value):
            raise ValueError(
                f"{name} looks like a secret and holds a literal value; write "
                f"'${{env:{name}}}' and export {name} where `fleet up` runs (secrets are never "
                "stored in specs, state or logs)"
            )


def resolve_env(env: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """``env`` with every reference replaced from ``environ``."""
    missing = sorted({m.group(1) for v in env.values() for m in REF_RE.finditer(v)} - set(environ))
    if missing:
        raise FleetError(
            f"node.env refers to ${', $'.join(missing)}, not set where `fleet up` runs; "
            f"export {' and '.join(missing)} (the value goes to the nodes only, never into a file "
            "spotfleet keeps)"
        )
    for ref in {m.group(1) for v in env.values() for m in REF_RE.finditer(v)}:
        register_secret(environ[ref])
    return {name: REF_RE.sub(lambda m: environ[m.group(1)], value) for name, value in env.items()}
