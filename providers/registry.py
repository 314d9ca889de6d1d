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
import threading
from pathlib import Path

from fleet.errors import FleetError
from fleet.home import LOCAL_CLOUD_ENV, local_cloud_root  # noqa: F401  (re-exported: where the local cloud lives)
from fleet.spec import Backend, FleetSpec, ProviderSettings
from providers.base import Provider
from providers.kit.record import AdapterFactory, CheckFunction, ProviderRecord

__all__ = [
    "AdapterFactory",
    "CheckFunction",
    "ProviderRecord",
    "names",
    "records",
    "record",
    "settings_model",
    "settings_models",
]

#: Provider name -> the package whose ``__init__`` declares its ``RECORD`` (one line per provider).
PACKAGES: dict[str, str] = {
    "aws": "providers.aws",
    "gcp": "providers.gcp",
    "azure": "providers.azure",
    "vast": "providers.vast",
    "oci": "providers.oci",
    "lambda": "providers.lambda_cloud",  # ``lambda`` is a Python keyword
    "runpod": "providers.runpod",
}

#: Providers in the price snapshot and the local cloud that no adapter ships for yet.
SIMULATED_ONLY: tuple[ProviderRecord, ...] = ()

_lock = threading.Lock()
#: The records read so far, by name: a package is imported when its record is first asked for, so
#: a command that needs one provider (``fleet status`` of a fleet on two) imports only those.
_records: dict[str, ProviderRecord] = {}


def _load(name: str) -> ProviderRecord | None:
    """``name``'s record, importing its package on first use (the caller holds ``_lock``)."""
    found = _records.get(name)
    if found is None and name in PACKAGES:
        found = importlib.import_module(PACKAGES[name]).RECORD
        if found.name != name:
            raise TypeError(f"{PACKAGES[name]}.RECORD is named {found.name!r}, registered as {name!r}")
        _records[name] = found
    if found is None:
        found = next((rec for rec in SIMULATED_ONLY if rec.name == name), None)
        if found is not None:
            _records[name] = found
    return found


def names() -> tuple[str, ...]:
    """Every provider's name, in :func:`records` order, without importing any provider package."""
    listed = (*PACKAGES, *(rec.name for rec in SIMULATED_ONLY))
    return tuple(dict.fromkeys((*listed, *_records)))


def records() -> dict[str, ProviderRecord]:
    """Every provider's record, by name, in :data:`PACKAGES` order then :data:`SIMULATED_ONLY`
    (imports every provider package: ask :func:`record` for one)."""
    with _lock:
        return {name: rec for name in names() if (rec := _load(name)) is not None}


def record(name: str) -> ProviderRecord:
    """``name``'s record (only its package is imported); FleetError for a provider spotfleet does not know."""
    with _lock:
        found = _load(name)
    if found is None:
        raise FleetError(f"unknown provider {name!r} (known: {', '.join(names())})")
    return found


def settings_models() -> dict[str, type[ProviderSettings]]:
    """Provider name -> its settings model (``fleet.spec`` reads every spec's providers with these)."""
    return {name: rec.settings for name, rec in records().items()}


def settings_model(name: str) -> type[ProviderSettings] | None:
    """``name``'s settings model, importing only its package; None for a provider spotfleet does not know."""
    with _lock:
        found = _load(name)
    return found.settings if found is not None else None


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
        except (ImportError, ValueError):  # a parent package missing or blocked
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
        from fleet.distribution import install_command

        raise FleetError(
            f"the {name} adapter needs a package that is not installed ({err.name}): {install_command(rec.extra)}"
        ) from err
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


def preflight(name: str, spec: FleetSpec) -> None:
    """Raise FleetError when provider ``name``'s record tells cheaply (``ProviderRecord.preflight``,
    no adapter imported) that its adapter cannot be built for ``spec`` here."""
    rec = records()[name]
    if rec.preflight is not None:
        rec.preflight(spec.provider_settings(name) or rec.settings())


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
    return (
        f"cannot launch on {', '.join(blocked)}: {'; '.join(blocked.values())}; disable {'it' if one else 'them'} under "
        "`providers:` in the spec, or set `backend: local` to run the fleet on the embedded simulated cloud"
    )


def providers_for(spec: FleetSpec, home: Path, *, launchable_only: bool = False) -> dict[str, Provider]:
    """One Provider per provider the spec allows, keyed by name.

    Raises FleetError (:func:`refusal`) when ``backend: cloud`` names a provider with no adapter,
    or whose adapter's SDK is not installed; with ``launchable_only`` those are left out instead
    (``fleet plan`` prices them from the snapshot and marks them).
    """
    if spec.backend is Backend.LOCAL:
        from providers.local import LocalCloud

        cloud = LocalCloud.open(local_cloud_root(home), time_scale=spec.local.time_scale, seed=spec.local.seed)
        return {
            name: cloud.provider(name) for name in cloud.provider_names() if spec.provider_settings(name) is not None
        }
    blocked = cannot_launch(spec)
    if blocked and not launchable_only:
        raise FleetError(refusal(blocked))
    wanted = [name for name in records() if spec.provider_settings(name) is not None and name not in blocked]
    for name in wanted:  # every cheap refusal before the first adapter is imported
        preflight(name, spec)
    return {name: build_adapter(name, spec) for name in wanted}
