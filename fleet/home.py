"""Where spotfleet keeps what it owns on this machine: one lookup for every layer.

``spotfleet_home(environ)`` is ``$SPOTFLEET_HOME`` or ``~/.spotfleet``. The CLI's ``--home`` sets
``$SPOTFLEET_HOME`` for the process (``fleet.cli.main``), so adapters (price caches, per-fleet SSH
keys), the wheel cache and the state store all agree on one folder, and so do the processes the
command starts. ``local_cloud_root(home)`` is where the embedded local cloud lives.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

HOME_ENV = "SPOTFLEET_HOME"
LOCAL_CLOUD_ENV = "SPOTFLEET_LOCAL_CLOUD"


def spotfleet_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$SPOTFLEET_HOME`` (from ``environ``, default the process environment) or ``~/.spotfleet``."""
    value = (os.environ if environ is None else environ).get(HOME_ENV)
    return Path(value).expanduser() if value else Path.home() / ".spotfleet"


def local_cloud_root(home: Path) -> Path:
    """The local cloud directory: ``$SPOTFLEET_LOCAL_CLOUD`` or ``<home>/localcloud``."""
    env = os.environ.get(LOCAL_CLOUD_ENV)
    return Path(env).expanduser() if env else Path(home) / "localcloud"
