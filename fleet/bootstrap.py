"""The one node start-up script every cloud adapter and Pulumi stack renders.

EC2 user data, a GCE ``startup-script``, Azure custom data and a Vast ``onstart`` are all the
same bash script, made by :func:`render`. On every run it:

1. logs each step with a UTC timestamp to the node log (``$SPOTFLEET_NODE_LOG``, default
   ``/var/log/spotfleet-node.log``; the prefix is ``$SPOTFLEET_PREFIX``, default
   ``/opt/spotfleet``: a node's environment may preset both) and to its own output (the console
   log); a failing step
   ends the script with a ``FAILED`` line naming the step and a ``fix:`` line saying what to do;
2. exports the fleet identity (``SPOTFLEET_FLEET``, ``SPOTFLEET_POOL``, ``SPOTFLEET_PROVIDER``),
   the checkpoint location (``SPOTFLEET_CHECKPOINT_URI``), ``SPOTFLEET_PREFIX``, ``SPOTFLEET_NODE_LOG``,
   ``SPOTFLEET_HOME`` (``<prefix>/home``: the agent's locks) and the spec's ``node.env``; in a
   fleet with a head these include ``SPOTFLEET_ROLE`` and, on workers, ``SPOTFLEET_HEAD_ADDR``
   and ``SPOTFLEET_HEAD_PORT`` (``fleet.provisioning.roles``);
3. gets spotfleet as ``spotfleet`` says (the spec's ``node.spotfleet``): ``ship`` downloads the
   wheel ``fleet up`` shipped (``wheel_url``, checked against ``wheel_sha256``) and installs it
   with its checkpoint store's extra into ``<prefix>/venv`` made from the image's Python (the
   newest ``python3.X`` >= 3.10 on PATH, or ``python``); a pip requirement is installed the same
   way; ``preinstalled`` uses the ``fleet`` in the prefix or on PATH and logs when its version
   differs from the launching one. An install that already holds the same wheel or requirement
   (``<prefix>/installed``) is kept;
4. starts the user's command under ``fleet run --cloud <cloud>`` in the background, so the node
   agent (interruption notices -> final checkpoint) and the restart-on-crash supervisor are on
   every node, with output in the node log; its pid is kept in ``<prefix>/agent.pid``.

Idempotent: a second run (a reboot, a rerun of the start-up script) takes ``<prefix>/boot.lock``,
reinstalls nothing that is installed and starts no second agent while the first runs (and
``fleet run`` itself refuses a second wrapper of the same job).

Contract: the output is deterministic for the same :class:`NodeBoot` (Pulumi diffs depend on it;
the shipped wheel's URL is reused for hours, ``fleet.provisioning.ship``); every value is
shell-quoted, so nothing in a spec can inject commands; values of ``secret_env`` are written only
into the script that goes to the node and are never part of :meth:`NodeBoot.describe`, nor is the
wheel's URL. Rendering does no I/O.
"""

from __future__ import annotations

import base64
import gzip
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from fleet import __version__
from fleet.model import LaunchRequest
from fleet.spec import PREINSTALLED, SHIP

#: ``fleet run --cloud`` value per provider: where the node agent reads interruption notices
#: (``none``: a provider that gives none: periodic checkpoints carry the work).
AGENT_CLOUD = {
    "aws": "aws",
    "gcp": "gcp",
    "azure": "azure",
    "vast": "vast",
    "oci": "oci",
    "local": "local",
    "lambda": "none",
    "runpod": "none",
}

#: Where the node keeps spotfleet and writes its log.
DEFAULT_PREFIX = "/opt/spotfleet"
LOG_PATH = "/var/log/spotfleet-node.log"
#: The pip extra a node installs for its checkpoint store, by URI scheme.
STORE_EXTRA = {"s3": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure"}

#: Set by the script itself from its prefix and log (a node's environment may preset the first two
#: and ``SPOTFLEET_PYTHON``, the interpreter to make the venv from).
_BOOT_VARIABLES = ("SPOTFLEET_PREFIX", "SPOTFLEET_NODE_LOG", "SPOTFLEET_HOME")

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_WHEEL_FILE = re.compile(r"^spotfleet-[A-Za-z0-9.+_]+-py3-none-any\.whl$")


@dataclass(frozen=True)
class NodeBoot:
    """Everything a node needs to join its fleet.

    ``provider`` picks the notice source of the node agent. ``command`` is the spec's
    ``node.startup`` (empty: the node only runs the agent). ``env`` are plain variables;
    ``secret_env`` are credentials that reach the node only (for example bucket keys for a
    Vast node). ``spotfleet`` is the source of spotfleet (``ship``, a pip requirement or
    ``preinstalled``); with ``ship``, ``wheel_url``/``wheel_file``/``wheel_sha256`` name the
    shipped wheel. ``prefix`` and ``log_path`` say where the node keeps spotfleet and its log;
    ``python`` pins the interpreter the venv is made from ("" = the newest >= 3.10 on PATH).
    """

    fleet: str
    pool: str
    provider: str
    command: str = ""
    checkpoint_uri: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    secret_env: Mapping[str, str] = field(default_factory=dict)
    spotfleet: str = SHIP
    wheel_url: str = field(default="", repr=False)
    wheel_file: str = ""
    wheel_sha256: str = ""
    prefix: str = DEFAULT_PREFIX
    log_path: str = LOG_PATH
    python: str = ""

    def __post_init__(self) -> None:
        if self.provider not in AGENT_CLOUD:
            raise ValueError(f"unknown provider {self.provider!r} for the node bootstrap")
        for name in [*self.env, *self.secret_env]:
            if not _ENV_NAME.match(name):
                raise ValueError(f"node environment variable name {name!r} is not a valid shell name")
        if self.wheel_file and not _WHEEL_FILE.match(self.wheel_file):
            raise ValueError(f"{self.wheel_file!r} is not a spotfleet wheel file name")
        if self.wheel_sha256 and not re.fullmatch(r"[0-9a-f]{64}", self.wheel_sha256):
            raise ValueError("wheel_sha256 must be 64 lowercase hex digits")

    @property
    def extra(self) -> str:
        """The pip extra of the checkpoint store (``s3``, ``gcs``, ``azure``; "" for none)."""
        return (
            STORE_EXTRA.get(self.checkpoint_uri.split("://", 1)[0].lower(), "") if "://" in self.checkpoint_uri else ""
        )

    def variables(self) -> dict[str, str]:
        """The environment the node's job sees (secrets included), in a stable order."""
        base = {"SPOTFLEET_FLEET": self.fleet, "SPOTFLEET_POOL": self.pool, "SPOTFLEET_PROVIDER": self.provider}
        if self.checkpoint_uri:
            base["SPOTFLEET_CHECKPOINT_URI"] = self.checkpoint_uri
        return {**base, **dict(sorted(self.env.items())), **dict(sorted(self.secret_env.items()))}

    def describe(self) -> dict[str, object]:
        """A printable summary: secret values are replaced by ``***``; the wheel's URL is left out."""
        return {
            "fleet": self.fleet,
            "pool": self.pool,
            "provider": self.provider,
            "command": self.command,
            "checkpoint_uri": self.checkpoint_uri,
            "env": dict(self.env),
            "secret_env": {k: "***" for k in sorted(self.secret_env)},
            "spotfleet": self.spotfleet,
            "wheel": self.wheel_file,
        }


def render(boot: NodeBoot) -> str:
    """The bash start-up script for ``boot`` (see the module docstring)."""
    q = shlex.quote
    exports = "\n".join(f"export {name}={q(value)}" for name, value in boot.variables().items())
    run = ['"$FLEET"', "run", "--cloud", AGENT_CLOUD[boot.provider], "--"]
    job = ["bash", "-lc", boot.command] if boot.command else ["sleep", "infinity"]
    run_line = " ".join([run[0], *(q(part) for part in [*run[1:], *job])])
    if boot.spotfleet == SHIP:
        source = f"ship {boot.wheel_file}"
        install = _fill(
            _SHIP,
            URL=q(boot.wheel_url),
            FILE=q(boot.wheel_file),
            SHA=q(boot.wheel_sha256),
            EXTRA=q(f"[{boot.extra}]" if boot.extra else ""),
        )
    elif boot.spotfleet == PREINSTALLED:
        source, install = PREINSTALLED, _PREINSTALLED
    else:
        source, install = boot.spotfleet, _fill(_REQUIREMENT, REQUIREMENT=q(boot.spotfleet))
    return f"""#!/bin/bash
# spotfleet node bootstrap: fleet {_plain(boot.fleet)}, pool {_plain(boot.pool)}
set -eEuo pipefail
umask 077
PREFIX=${{SPOTFLEET_PREFIX:-}}; [ -n "$PREFIX" ] || PREFIX={q(boot.prefix)}
LOG=${{SPOTFLEET_NODE_LOG:-}}; [ -n "$LOG" ] || LOG={q(boot.log_path)}
WANT_PYTHON=${{SPOTFLEET_PYTHON:-}}; [ -n "$WANT_PYTHON" ] || WANT_PYTHON={q(boot.python)}
VENV="$PREFIX/venv"
LAUNCHED_BY={q(__version__)}
SOURCE={q(source)}
mkdir -p "$PREFIX" "$(dirname "$LOG")"
touch "$LOG"
exec > >(tee -a "$LOG") 2>&1
STEP=start FIX=""
log() {{ printf '%s spotfleet-boot: %s\\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }}
step() {{ STEP="$1"; FIX="$2"; log "$1"; }}
fail() {{ local rc=$?; log "FAILED (exit $rc) at line $1 ($2) while: $STEP"; [ -z "$FIX" ] || log "fix: $FIX"; exit "$rc"; }}
trap 'fail "$LINENO" "$BASH_COMMAND"' ERR
{exports}
export SPOTFLEET_PREFIX="$PREFIX" SPOTFLEET_NODE_LOG="$LOG" SPOTFLEET_HOME="$PREFIX/home"
for name in {" ".join([*boot.variables(), *_BOOT_VARIABLES])}; do printf 'export %s=%q\\n' "$name" "${{!name}}"; done > "$PREFIX/env"
exec 9>>"$PREFIX/boot.lock"
if command -v flock >/dev/null 2>&1 && ! flock -n 9; then
  log "another bootstrap holds $PREFIX/boot.lock; this run does nothing"
  exit 0
fi
if [ -s "$PREFIX/agent.pid" ] && kill -0 "$(cat "$PREFIX/agent.pid")" 2>/dev/null \\
   && grep -q fleet "/proc/$(cat "$PREFIX/agent.pid")/cmdline" 2>/dev/null; then
  log "the node agent already runs (pid $(cat "$PREFIX/agent.pid")); nothing to start"
  exit 0
fi
log "boot of fleet $SPOTFLEET_FLEET pool $SPOTFLEET_POOL; spotfleet from: $SOURCE (launched by $LAUNCHED_BY)"
{_PYTHON}
{install}
step "starting the node agent and the job: fleet run (log $LOG)" "read the lines above in $LOG"
nohup {run_line} >> "$LOG" 2>&1 < /dev/null 9>&- &
echo $! > "$PREFIX/agent.pid"
log "node agent started (pid $!)"
"""


#: Finds the image's Python (>= 3.10) and makes the venv; installs python3/venv where it is missing.
_PYTHON = r"""find_python() {
  local c p
  for c in ${WANT_PYTHON:-python3.13 python3.12 python3.11 python3.10 python3 python}; do
    p=$(command -v "$c" 2>/dev/null) || continue
    "$p" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null && { echo "$p"; return 0; }
  done
  return 1
}
make_venv() {
  [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import sys' 2>/dev/null && return 0
  step "creating $VENV" "the image's Python needs its venv module (Debian/Ubuntu: apt-get install python3-venv)"
  rm -rf "$VENV"
  if ! "$PY" -m venv "$VENV" 2>/dev/null; then
    rm -rf "$VENV"
    command -v apt-get >/dev/null 2>&1 && apt-get install -y -q "python3.$("$PY" -c 'import sys; print(sys.version_info[1])')-venv" python3-venv
    "$PY" -m venv "$VENV"
  fi
}
step "looking for Python >= 3.10" "use an image with Python 3.10 or newer (node.image), or one with apt-get/dnf"
if ! PY=$(find_python); then
  log "no Python >= 3.10 on PATH; installing the distribution's python3"
  (apt-get update -q && apt-get install -y -q python3 python3-venv) || dnf install -y python3 || yum install -y python3
  PY=$(find_python)
fi
log "python: $PY ($("$PY" -V 2>&1))"
"""

_SHIP = r"""WHEEL_URL=@URL@
WHEEL_FILE=@FILE@
WHEEL_SHA256=@SHA@
WHEEL_EXTRA=@EXTRA@
if [ "$(cat "$PREFIX/installed" 2>/dev/null)" = "$WHEEL_FILE" ] && "$VENV/bin/fleet" --version >/dev/null 2>&1; then
  log "spotfleet $WHEEL_FILE is installed in $VENV already"
else
  make_venv
  step "downloading $WHEEL_FILE" "the wheel's URL lasts hours: rerun \`fleet up\` (or let the rebalancer replace the node) for a fresh one"
  mkdir -p "$PREFIX/wheels"
  "$PY" - "$WHEEL_URL" "$PREFIX/wheels/$WHEEL_FILE" "$WHEEL_SHA256" <<'FETCH'
import hashlib, os, sys, time, urllib.request
url, dest, want = sys.argv[1:4]
for attempt in range(5):
    try:
        digest, tmp = hashlib.sha256(), dest + ".part"
        with urllib.request.urlopen(url, timeout=120) as answer, open(tmp, "wb") as out:
            for chunk in iter(lambda: answer.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
        break
    except OSError as err:
        print(f"download attempt {attempt + 1} failed: {err}", file=sys.stderr)
        if attempt == 4:
            raise SystemExit(1)
        time.sleep(2 ** attempt)
if digest.hexdigest() != want:
    raise SystemExit(f"the download's sha256 is {digest.hexdigest()}, expected {want}")
os.replace(tmp, dest)
FETCH
  step "installing $WHEEL_FILE$WHEEL_EXTRA and its dependencies into $VENV" "the node needs the package index (PyPI or \$PIP_INDEX_URL) for spotfleet's dependencies"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "$PREFIX/wheels/$WHEEL_FILE$WHEEL_EXTRA"
  printf '%s\n' "$WHEEL_FILE" > "$PREFIX/installed"
fi
FLEET="$VENV/bin/fleet"
log "spotfleet: $("$FLEET" --version 2>&1)"
"""

_REQUIREMENT = r"""REQUIREMENT=@REQUIREMENT@
if [ "$(cat "$PREFIX/installed" 2>/dev/null)" = "$REQUIREMENT" ] && "$VENV/bin/fleet" --version >/dev/null 2>&1; then
  log "spotfleet ($REQUIREMENT) is installed in $VENV already"
else
  make_venv
  step "installing $REQUIREMENT into $VENV" "node.spotfleet must be a requirement pip can install from the node (a published version or a VCS URL)"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "$REQUIREMENT"
  printf '%s\n' "$REQUIREMENT" > "$PREFIX/installed"
fi
FLEET="$VENV/bin/fleet"
log "spotfleet: $("$FLEET" --version 2>&1)"
"""

_PREINSTALLED = r"""step "looking for the image's spotfleet" "node.spotfleet is preinstalled: use an image with spotfleet, or node.spotfleet: ship"
if [ -x "$VENV/bin/fleet" ]; then FLEET="$VENV/bin/fleet"; else FLEET=$(command -v fleet); fi
FOUND=$("$FLEET" --version 2>&1 | sed -n 's/.*version //p')
if [ "$FOUND" = "$LAUNCHED_BY" ]; then
  log "spotfleet $FOUND at $FLEET"
else
  log "spotfleet at $FLEET is version ${FOUND:-unknown}, not $LAUNCHED_BY that launched this node"
fi
"""


def _fill(template: str, **values: str) -> str:
    """``template`` with each ``@NAME@`` replaced by its (already quoted) value."""
    for name, value in values.items():
        template = template.replace(f"@{name}@", value)
    return template


def boot_for(provider: str, request: LaunchRequest, secret_env: Mapping[str, str] | None = None) -> NodeBoot:
    """The NodeBoot every adapter renders for a launch request (one place, no copies)."""
    node = request.node
    return NodeBoot(
        fleet=request.fleet,
        pool=request.offer.pool.id,
        provider=provider,
        command=node.startup,
        checkpoint_uri=node.checkpoint_uri,
        env=dict(node.env),
        secret_env=dict(secret_env or {}),
        spotfleet=node.spotfleet,
        wheel_url=node.wheel_url,
        wheel_file=node.wheel_file,
        wheel_sha256=node.wheel_sha256,
    )


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
