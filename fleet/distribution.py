"""How to install the running spotfleet again, with an extra: the one hint every "install X" error gives.

spotfleet is not on a package index, so ``pip install 'spotfleet[aws]'`` works only where someone
published it. :func:`install_command` says what works for the running installation:

* a checkout (``pyproject.toml`` of spotfleet beside the ``fleet`` package): ``pip install '<checkout>[aws]'``;
* installed from a wheel or directory (PEP 610 ``direct_url.json``): that path or URL with the extra;
* otherwise (installed from an index, so published there): ``pip install 'spotfleet[aws]==<version>'``.

It reads a few small files and never raises.
"""

from __future__ import annotations

import json
import shlex
from importlib import metadata as importlib_metadata
from urllib.parse import unquote, urlsplit

from fleet import __version__
from fleet.provisioning.wheel import DIST, package_root


def install_command(extra: str) -> str:
    """A ``pip install`` command that adds ``extra`` to this spotfleet (see the module doc)."""
    root = package_root()
    pyproject = root / "pyproject.toml"
    try:
        if pyproject.is_file() and f'name = "{DIST}"' in pyproject.read_text():
            return f"pip install {shlex.quote(f'{root}[{extra}]')}"
    except OSError:
        pass
    source = _installed_from()
    if source:
        return f"pip install {shlex.quote(f'{source}[{extra}]')}"
    return f"pip install {shlex.quote(f'{DIST}[{extra}]=={__version__}')}"


def _installed_from() -> str:
    """The local path (or URL) spotfleet was installed from, "" when it came from an index."""
    try:
        text = importlib_metadata.distribution(DIST).read_text("direct_url.json")
        url = json.loads(text or "{}").get("url", "")
    except (importlib_metadata.PackageNotFoundError, ValueError, OSError, AttributeError):
        return ""
    if not isinstance(url, str) or not url:
        return ""
    parts = urlsplit(url)
    return unquote(parts.path) if parts.scheme == "file" else url
