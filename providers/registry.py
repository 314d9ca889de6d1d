"""Which Provider objects a fleet spec gets: the embedded local cloud, or real adapters.

``providers_for(spec, home)`` is the one place the rest of spotfleet asks for providers.
With ``backend: local`` every provider the spec allows is simulated by the local cloud
in ``$SPOTFLEET_LOCAL_CLOUD`` or ``<home>/localcloud``. With ``backend: cloud`` each
provider is built by the adapter factory registered under its name
(``register_cloud_adapter``); none ships in this version yet.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from fleet.errors import FleetError
from fleet.spec import KNOWN_PROVIDERS, Backend, FleetSpec, ProviderSettings
from providers.base import Provider

#: Builds a real adapter from the spec's settings for that provider.
AdapterFactory = Callable[[FleetSpec, ProviderSettings], Provider]

_CLOUD_ADAPTERS: dict[str, AdapterFactory] = {}

LOCAL_CLOUD_ENV = "SPOTFLEET_LOCAL_CLOUD"


def register_cloud_adapter(name: str, factory: AdapterFactory) -> None:
    """Make ``backend: cloud`` build provider ``name`` with ``factory`` (adapters call this)."""
    _CLOUD_ADAPTERS[name] = factory


def local_cloud_root(home: Path) -> Path:
    """The local cloud directory: ``$SPOTFLEET_LOCAL_CLOUD`` or ``<home>/localcloud``."""
    env = os.environ.get(LOCAL_CLOUD_ENV)
    return Path(env).expanduser() if env else Path(home) / "localcloud"


def providers_for(spec: FleetSpec, home: Path) -> dict[str, Provider]:
    """One Provider per provider the spec allows, keyed by name.

    Raises FleetError when ``backend: cloud`` names a provider with no registered adapter.
    """
    if spec.backend is Backend.LOCAL:
        from providers.local import LocalCloud

        cloud = LocalCloud.open(local_cloud_root(home), time_scale=spec.local.time_scale, seed=spec.local.seed)
        return {name: cloud.provider(name) for name in cloud.provider_names()
                if spec.provider_settings(name) is not None}
    wanted = [name for name in KNOWN_PROVIDERS if spec.provider_settings(name) is not None]
    missing = [name for name in wanted if name not in _CLOUD_ADAPTERS]
    if missing:
        raise FleetError(
            f"the real cloud adapters ({', '.join(missing)}) are not part of this version of spotfleet yet; "
            "set `backend: local` in the spec to run the fleet on the embedded simulated cloud")
    return {name: _CLOUD_ADAPTERS[name](spec, spec.provider_settings(name) or ProviderSettings())
            for name in wanted}
