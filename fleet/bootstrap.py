"""The one node start-up script every cloud adapter and Pulumi stack renders.

EC2 user data, a GCE ``startup-script``, Azure custom data and a Vast ``onstart`` are all the
same bash script, made by :func:`render`. On first boot it:

1. exports the fleet identity (``SPOTFLEET_FLEET``, ``SPOTFLEET_POOL``, ``SPOTFLEET_PROVIDER``),
   the checkpoint location (``SPOTFLEET_CHECKPOINT_URI``) and the spec's ``node.env``; in a fleet
   with a head these include ``SPOTFLEET_ROLE`` and, on workers, ``SPOTFLEET_HEAD_ADDR`` and
   ``SPOTFLEET_HEAD_PORT`` (``fleet.provisioning.roles``);
2. installs spotfleet into its own virtual environment (``/opt/spotfleet`` by default) unless a
   ``fleet`` command is already on the image at the pinned version;
3. starts the user's command under ``fleet run --cloud <cloud>`` in the background, so the node
   agent (interruption notices -> final checkpoint) and the restart-on-crash supervisor are on
   every node, with output in ``/var/log/spotfleet-node.log``.

Contract: the output is deterministic for the same :class:`NodeBoot` (idempotency tokens and
Pulumi diffs depend on it); every value is shell-quoted, so nothing in a spec can inject
commands; values of ``secret_env`` are written only into the script that goes to the node and
are never part of :meth:`NodeBoot.describe`. Rendering does no I/O.
"""

from __future__ import annotations

import base64
import gzip
import re
import shlex
from dataclasses import dataclass, field
from typing import Mapping

from fleet import __version__
from fleet.model import LaunchRequest

#: ``fleet run --cloud`` value per provider: where the node agent reads interruption notices.
AGENT_CLOUD = {"aws": "aws", "gcp": "gcp", "azure": "azure", "vast": "vast", "local": "local"}

#: Where the node keeps spotfleet and writes its log.
DEFAULT_PREFIX = "/opt/spotfleet"
LOG_PATH = "/var/log/spotfleet-node.log"

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class NodeBoot:
    """Everything a node needs to join its fleet.

    ``provider`` picks the notice source of the node agent. ``command`` is the spec's
    ``node.startup`` (empty: the node only runs the agent). ``env`` are plain variables;
    ``secret_env`` are credentials that reach the node only (for example bucket keys for a
    Vast node). ``package`` is the pip requirement installed on the node.
    """

    fleet: str
    pool: str
    provider: str
    command: str = ""
    checkpoint_uri: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    secret_env: Mapping[str, str] = field(default_factory=dict)
    package: str = f"spotfleet[storage]=={__version__}"
    prefix: str = DEFAULT_PREFIX
    log_path: str = LOG_PATH

    def __post_init__(self) -> None:
        if self.provider not in AGENT_CLOUD:
            raise ValueError(f"unknown provider {self.provider!r} for the node bootstrap")
        for name in [*self.env, *self.secret_env]:
            if not _ENV_NAME.match(name):
                raise ValueError(f"node environment variable name {name!r} is not a valid shell name")

    def variables(self) -> dict[str, str]:
        """The environment the node's job sees (secrets included), in a stable order."""
        base = {"SPOTFLEET_FLEET": self.fleet, "SPOTFLEET_POOL": self.pool, "SPOTFLEET_PROVIDER": self.provider}
        if self.checkpoint_uri:
            base["SPOTFLEET_CHECKPOINT_URI"] = self.checkpoint_uri
        return {**base, **dict(sorted(self.env.items())), **dict(sorted(self.secret_env.items()))}

    def describe(self) -> dict[str, object]:
        """A printable summary: secret values are replaced by ``***``."""
        return {"fleet": self.fleet, "pool": self.pool, "provider": self.provider, "command": self.command,
                "checkpoint_uri": self.checkpoint_uri, "env": dict(self.env),
                "secret_env": {k: "***" for k in sorted(self.secret_env)}, "package": self.package}


def render(boot: NodeBoot) -> str:
    """The bash start-up script for ``boot`` (see the module docstring)."""
    q = shlex.quote
    exports = "\n".join(f"export {name}={q(value)}" for name, value in boot.variables().items())
    venv = f"{boot.prefix}/venv"
    run = [f"{venv}/bin/fleet", "run", "--cloud", AGENT_CLOUD[boot.provider], "--"]
    job = ["bash", "-lc", boot.command] if boot.command else ["sleep", "infinity"]
    run_line = " ".join(q(part) for part in [*run, *job])
    return f"""#!/bin/bash
# spotfleet node bootstrap: fleet {_plain(boot.fleet)}, pool {_plain(boot.pool)}
set -euo pipefail
umask 077
{exports}
mkdir -p {q(boot.prefix)}
for name in {" ".join(boot.variables())}; do printf 'export %s=%q\n' "$name" "${{!name}}"; done > {q(boot.prefix + "/env")}
if ! {q(venv + "/bin/fleet")} --version >/dev/null 2>&1; then
  if ! command -v python3 >/dev/null 2>&1; then
    (apt-get update -q && apt-get install -y -q python3 python3-venv) || dnf install -y python3 || yum install -y python3
  fi
  python3 -m venv {q(venv)} || (apt-get install -y -q python3-venv && python3 -m venv {q(venv)})
  {q(venv + "/bin/pip")} install --quiet --upgrade pip
  {q(venv + "/bin/pip")} install --quiet {q(boot.package)}
fi
nohup {run_line} >> {q(boot.log_path)} 2>&1 < /dev/null &
echo "spotfleet: node agent and job started (log {boot.log_path})"
"""


def boot_for(provider: str, request: LaunchRequest, secret_env: Mapping[str, str] | None = None) -> NodeBoot:
    """The NodeBoot every adapter renders for a launch request (one place, no copies)."""
    return NodeBoot(fleet=request.fleet, pool=request.offer.pool.id, provider=provider,
                    command=request.node.startup, checkpoint_uri=request.node.checkpoint_uri,
                    env=dict(request.node.env), secret_env=dict(secret_env or {}))


def _plain(text: str) -> str:
    """``text`` safe inside a comment line: anything unusual (a newline above all) becomes ``?``."""
    return re.sub(r"[^A-Za-z0-9._/:@+-]", "?", text)[:120]


def render_base64(boot: NodeBoot) -> str:
    """The script base64-encoded (EC2 launch templates and Azure custom data take it so)."""
    return base64.b64encode(render(boot).encode()).decode()


def render_gzip_base64(boot: NodeBoot) -> str:
    """The script gzipped then base64-encoded, for providers with a small user-data limit.

    cloud-init recognises gzip-compressed user data by its magic bytes.
    """
    return base64.b64encode(gzip.compress(render(boot).encode(), mtime=0)).decode()
