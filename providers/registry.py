"""Which Provider objects a fleet spec gets, and the one list of providers spotfleet knows.

Every provider has one registration record (``providers.kit.record.ProviderRecord``), declared
as ``RECORD`` in its package ``providers/<name>/__init__.py``; :data:`PACKAGES` lists the packages
and :data:`SIMULATED_ONLY` the providers priced and simulated without an adapter. Every
per-provider table (known names, settings models, extras, ``fleet check``, notice seconds, Pulumi
support) is derived from the records here; nothing else names the providers.

``providers_for(spec, home)`` is the one place the rest of spotfleet asks for providers.
With ``backend: local`` every provider the spec allows is simulated by the local cloud
in ``$SPOTFLEET_LOCAL_CLOUD`` or ``<home>/localcloud``. With ``backend: cloud`` each
provider is built by its record's ``factory``, once its ``sdk_modules`` are found, so a user
installs only the SDKs of the clouds they use (the extra, e.g. ``aws``, installed as
``fleet.distribution.install_command`` says: spotfleet is not on an index, so from the checkout
or wheel it came from). Records import no SDK and no adapter code.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from pathlib import Path

from fleet.distribution import install_command
from fleet.errors import FleetError
from fleet.spec import Backend, FleetSpec, ProviderSettings
from providers.base import Provider
from providers.kit.record import AdapterFactory, CheckFunction, ProviderRecord

__all__ = ["AdapterFactory", "CheckFunction", "ProviderRecord", "records", "record", "settings_models"]

#: Provider name -> the package whose ``__init__`` declares its ``RECORD`` (one line per provider).
PACKAGES: dict[str, str] = {
    "aws": "providers.aws",
    "gcp": "providers.gcp",
    "azure": "providers.azure",
    "vast": "providers.vast",
    "oci": "providers.oci",
    "lambda": "providers.lambda_cloud",      # ``lambda`` is a Python keyword
    "runpod": "providers.runpod",
}

#: Providers in the price snapshot and the local cloud that no adapter ships for yet.
SIMULATED_ONLY: tuple[ProviderRecord, ...] = ()

LOCAL_CLOUD_ENV = "SPOTFLEET_LOCAL_CLOUD"

_lock = threading.Lock()
_records: dict[str, ProviderRecord] = {}


def records() -> dict[str, ProviderRecord]:
    """Every provider's record, by name, in :data:`PACKAGES` order then :data:`SIMULATED_ONLY`."""
    with _lock:
        if not _records:
            found: dict[str, ProviderRecord] = {}
            for name, package in PACKAGES.items():
                rec = importlib.import_module(package).RECORD
                if rec.name != name:
                    raise TypeError(f"{package}.RECORD is named {rec.name!r}, registered as {name!r}")
                found[name] = rec
            for rec in SIMULATED_ONLY:
                found.setdefault(rec.name, rec)
            _records.update(found)
        return dict(_records)


def record(name: str) -> ProviderRecord:
    """``name``'s record; FleetError for a provider spotfleet does not know."""
    found = records().get(name)
    if found is None:
        raise FleetError(f"unknown provider {name!r} (known: {', '.join(records())})")
    return found


def settings_models() -> dict[str, type[ProviderSettings]]:
    """Provider name -> its settings model (``fleet.spec`` reads every spec's providers with these)."""
    return {name: rec.settings for name, rec in records().items()}


def adapter_extras() -> dict[str, str]:
    """Provider name -> the pip extra of its adapter, for every provider an adapter ships for."""
    return {name: rec.extra for name, rec in records().items() if rec.has_adapter}


def require_sdk(*modules: str) -> None:
    """Raise ModuleNotFoundError (its ``name`` the module) for the first of ``modules`` that is not
    installed, without importing any of them, so the missing extra is named at once while the SDK
    itself (seconds to import) is imported only when the adapter first talks to its cloud."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):    # a parent package missing or blocked
            found = None
        if found is None:
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)


def load_adapter(name: str) -> bool:
    """Whether an adapter ships for ``name`` and its SDK is installed (found, not imported).

    False when no adapter ships; raises FleetError naming the extra to install when the SDK is
    missing.
    """
    rec = records().get(name)
    if rec is None or not rec.has_adapter:
        return False
    try:
        require_sdk(*rec.sdk_modules)
    except ModuleNotFoundError as err:
        raise FleetError(f"the {name} adapter needs a package that is not installed ({err.name}): "
                         f"{install_command(rec.extra)}") from err
    return True


def cloud_check(name: str) -> CheckFunction | None:
    """The ``fleet check`` function of adapter ``name`` (``None`` when it has none or none ships)."""
    if not load_adapter(name):
        return None
    return records()[name].check


def build_adapter(name: str, spec: FleetSpec) -> Provider:
    """Provider ``name``'s adapter for ``spec`` (:func:`load_adapter` must have said True)."""
    rec = records()[name]
    assert rec.factory is not None
    return rec.factory(spec, spec.provider_settings(name) or rec.settings())


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
    for name in records():
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
    wanted = [name for name in records() if spec.provider_settings(name) is not None and name not in blocked]
    return {name: build_adapter(name, spec) for name in wanted}
