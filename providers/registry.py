"""Which Provider objects a fleet spec gets: the embedded local cloud, or real adapters.

``providers_for(spec, home)`` is the one place the rest of spotfleet asks for providers.
With ``backend: local`` every provider the spec allows is simulated by the local cloud
in ``$SPOTFLEET_LOCAL_CLOUD`` or ``<home>/localcloud``. With ``backend: cloud`` each
provider is built by the adapter factory registered under its name
(``register_cloud_adapter``). Adapters live in ``providers/<name>/`` and register themselves
when imported; :func:`load_adapter` imports one on first use, so a user installs only the SDKs
of the clouds they use (the extra, e.g. ``aws``, installed as ``fleet.distribution.install_command``
says: spotfleet is not on an index, so from the checkout or wheel it came from).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Callable

from fleet.distribution import install_command
from fleet.errors import FleetError
from fleet.spec import KNOWN_PROVIDERS, Backend, FleetSpec, ProviderSettings
from providers.base import CheckResult, Provider

#: Builds a real adapter from the spec's settings for that provider.
AdapterFactory = Callable[[FleetSpec, ProviderSettings], Provider]
#: Answers ``fleet check`` for one provider from its settings (no spec needed).
CheckFunction = Callable[[ProviderSettings], CheckResult]

_CLOUD_ADAPTERS: dict[str, AdapterFactory] = {}
_CLOUD_CHECKS: dict[str, CheckFunction] = {}

#: The pip extra that brings each adapter's SDK.
ADAPTER_EXTRAS = {"aws": "aws", "gcp": "gcp", "azure": "azure-vm", "vast": "vast", "lambda": "lambda"}
#: The package of an adapter whose provider name cannot name one (``lambda`` is a Python keyword).
ADAPTER_PACKAGES = {"lambda": "providers.lambda_cloud"}

LOCAL_CLOUD_ENV = "SPOTFLEET_LOCAL_CLOUD"


def register_cloud_adapter(name: str, factory: AdapterFactory, check: CheckFunction | None = None) -> None:
    """Make ``backend: cloud`` build provider ``name`` with ``factory`` (adapters call this).

    ``check`` answers ``fleet check`` for that provider.
    """
    _CLOUD_ADAPTERS[name] = factory
    if check is not None:
        _CLOUD_CHECKS[name] = check


def require_sdk(*modules: str) -> None:
    """Raise ModuleNotFoundError (its ``name`` the module) for the first of ``modules`` that is not
    installed, without importing any of them: an adapter's ``__init__`` calls this so that
    :func:`load_adapter` names the missing extra at once, while the SDK itself (seconds to import)
    is imported only when the adapter first talks to its cloud."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):    # a parent package missing or blocked
            found = None
        if found is None:
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)


def load_adapter(name: str) -> bool:
    """Import ``providers.<name>`` so it registers itself; False when no such adapter ships.

    Raises FleetError naming the extra to install when the adapter's SDK is missing.
    """
    if name in _CLOUD_ADAPTERS:
        return True
    if name not in ADAPTER_EXTRAS:
        return False
    package = ADAPTER_PACKAGES.get(name, f"providers.{name}")
    try:
        importlib.import_module(package)
    except ModuleNotFoundError as err:
        if err.name and (err.name == package or err.name.startswith(f"{package}.")):
            return False
        raise FleetError(f"the {name} adapter needs a package that is not installed ({err.name}): "
                         f"{install_command(ADAPTER_EXTRAS[name])}") from err
    return name in _CLOUD_ADAPTERS


def cloud_check(name: str) -> CheckFunction | None:
    """The registered ``fleet check`` function of adapter ``name``, importing it if needed."""
    load_adapter(name)
    return _CLOUD_CHECKS.get(name)


def local_cloud_root(home: Path) -> Path:
    """The local cloud directory: ``$SPOTFLEET_LOCAL_CLOUD`` or ``<home>/localcloud``."""
    env = os.environ.get(LOCAL_CLOUD_ENV)
    return Path(env).expanduser() if env else Path(home) / "localcloud"


def cannot_launch(spec: FleetSpec) -> dict[str, str]:
    """The providers ``spec`` enables that ``fleet up`` cannot launch on with this installation,
    each with why (no adapter ships for it, or its SDK is not installed: the pip extra is
    named); empty for ``backend: local``, where the local cloud simulates every provider."""
    if spec.backend is Backend.LOCAL:
        return {}
    out: dict[str, str] = {}
    for name in KNOWN_PROVIDERS:
        if spec.provider_settings(name) is None:
            continue
        try:
            if not load_adapter(name):
                out[name] = f"no cloud adapter for {name} in this version of spotfleet"
        except FleetError as err:
            out[name] = str(err)
    return out


def refusal(blocked: dict[str, str]) -> str:
    """The one line ``fleet up`` (and every command that launches) says for ``cannot_launch``."""
    one = len(blocked) == 1
    return (f"cannot launch on {', '.join(blocked)}: {'; '.join(blocked.values())}; disable {'it' if one else 'them'} under "
            "`providers:` in the spec, or set `backend: local` to run the fleet on the embedded simulated cloud")


def providers_for(spec: FleetSpec, home: Path, *, launchable_only: bool = False) -> dict[str, Provider]:
    """One Provider per provider the spec allows, keyed by name.

    Raises FleetError (:func:`refusal`) when ``backend: cloud`` names a provider with no adapter,
    or whose adapter's SDK is not installed; with ``launchable_only`` those are left out instead
    (``fleet plan`` prices them from the snapshot and marks them).
    """
    if spec.backend is Backend.LOCAL:
        from providers.local import LocalCloud

        cloud = LocalCloud.open(local_cloud_root(home), time_scale=spec.local.time_scale, seed=spec.local.seed)
        return {name: cloud.provider(name) for name in cloud.provider_names()
                if spec.provider_settings(name) is not None}
    blocked = cannot_launch(spec)
    if blocked and not launchable_only:
        raise FleetError(refusal(blocked))
    wanted = [name for name in KNOWN_PROVIDERS if spec.provider_settings(name) is not None and name not in blocked]
    return {name: _CLOUD_ADAPTERS[name](spec, spec.provider_settings(name) or ProviderSettings())
            for name in wanted}
