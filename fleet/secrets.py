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
"""

from __future__ import annotations

import re
from typing import Mapping

from fleet.errors import FleetError

REF_RE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_ANY_REF = re.compile(r"\$\{env:[^}]*\}?")
SECRET_NAME_RE = re.compile(
    r"SECRET|PASSWORD|PASSWD|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CONNECTION_?STRING|CREDENTIAL|SAS_?KEY"
    r"|ACCOUNT_?KEY", re.IGNORECASE)


def check_env(env: Mapping[str, str]) -> None:
    """Raise ``ValueError`` (one sentence naming the variable and the fix) when ``env`` breaks the rule above."""
    for name, value in env.items():
        bad = [m.group(0) for m in _ANY_REF.finditer(value) if not REF_RE.fullmatch(m.group(0))]
        if bad:
            raise ValueError(f"{name}: {bad[0][:40]!r} is not a reference; write ${{env:VARIABLE_NAME}}")
        if SECRET_NAME_RE.search(name) and value and not REF_RE.search(value):
            raise ValueError(f"{name} looks like a secret and holds a literal value; write "
                             f"'${{env:{name}}}' and export {name} where `fleet up` runs (secrets are never "
                             "stored in specs, state or logs)")


def resolve_env(env: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """``env`` with every reference replaced from ``environ``."""
    missing = sorted({m.group(1) for v in env.values() for m in REF_RE.finditer(v)} - set(environ))
    if missing:
        raise FleetError(f"node.env refers to ${', $'.join(missing)}, not set where `fleet up` runs; "
                         f"export {' and '.join(missing)} (the value goes to the nodes only, never into a file "
                         "spotfleet keeps)")
    return {name: REF_RE.sub(lambda m: environ[m.group(1)], value) for name, value in env.items()}
