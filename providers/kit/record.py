"""One registration record per provider: everything the rest of spotfleet needs to know about it.

Each adapter package declares ``RECORD = ProviderRecord(...)`` in ``providers/<name>/__init__.py``;
``providers.registry`` lists the packages and derives every per-provider table from the records
(known names, settings models, extras, ``fleet check``, notice seconds, Pulumi support). Importing
a package for its record imports no SDK and no adapter code: ``factory`` and ``check`` are
:func:`on_call` references that import the adapter when called (after ``sdk_modules`` were found),
so ``fleet spec check`` and the spec schema stay fast and work without any extra installed.

A provider without an adapter in this version (priced from the snapshot and simulated by the
local cloud only) has a record with ``factory=None``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleet.spec import ProviderSettings

if TYPE_CHECKING:
    from fleet.spec import FleetSpec
    from providers.base import CheckResult, Provider

#: Builds a real adapter from the spec and that provider's settings (its own settings model).
AdapterFactory = Callable[["FleetSpec", ProviderSettings], "Provider"]
#: Answers ``fleet check`` for one provider from its settings (no spec needed).
CheckFunction = Callable[[ProviderSettings], "CheckResult"]


def on_call(target: str) -> Callable[..., Any]:
    """A function that imports ``target`` (``"package.module:function"``, as an entry point names
    it) when first called and calls it: a record names its factory and check this way, so reading
    the record imports no adapter code."""
    module, _, name = target.partition(":")
    if not module or not name.isidentifier():
        raise ValueError(f"{target!r}: name a function as 'package.module:function'")
    found: list[Callable[..., Any]] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        if not found:
            found.append(vars(importlib.import_module(module))[name])
        return found[0](*args, **kwargs)

    call.__qualname__ = call.__name__ = name
    call.__doc__ = f"{target}, imported when first called."
    return call


@dataclass(frozen=True)
class ProviderRecord:
    """What spotfleet knows about one provider (see the module doc).

    ``name``: as in specs and pool ids. ``settings``: the provider's own settings model, a
    subclass of ``fleet.spec.ProviderSettings`` (unknown keys are refused, naming the field).
    ``factory`` / ``check``: build the adapter / answer ``fleet check`` (``None``: no adapter ships).
    ``extra``: the pip extra that brings ``sdk_modules`` (looked for, not imported, before ``factory``).
    ``preflight``: a cheap check of the settings and the environment (no adapter code imported)
    that raises FleetError when ``factory`` would refuse (GCP: no project); ``providers_for`` runs
    every provider's before building any adapter, so a spec that falls back to the price snapshot
    imports none (``None``: the factory refuses nothing it could tell early).
    ``notice_seconds``: the interruption notice a node gets (0: none; checkpoints carry the work).
    ``spot``: the provider sells interruptible capacity; ``zones``: its pools name zones.
    ``checkpoint_scheme``: the URI scheme of the store ``ensure_bucket`` returns (``s3``, ``gs``,
    ``az``, ``file`` for the node's own disk). ``agent_cloud``: the node agent's ``--cloud`` for it
    (``""``: the agent has no watcher for it). ``pulumi_stack``: ``module:Class`` of its stack
    component, or ``""`` with ``pulumi_refusal`` saying why ``fleet export pulumi`` refuses it.
    ``title``: the name people write (``Vast.ai``); the page ``docs/providers/<name>.md``, titled
    ``Running on <title>``, documents it. ``summary``: one line for docs.
    """

    name: str
    title: str = ""
    settings: type[ProviderSettings] = ProviderSettings
    factory: AdapterFactory | None = None
    check: CheckFunction | None = None
    preflight: Callable[[ProviderSettings], object] | None = None
    extra: str = ""
    sdk_modules: tuple[str, ...] = ()
    notice_seconds: int = 0
    spot: bool = True
    zones: bool = True
    checkpoint_scheme: str = ""
    agent_cloud: str = ""
    pulumi_stack: str = ""
    pulumi_refusal: str = ""
    summary: str = ""

    def __post_init__(self) -> None:
        if not issubclass(self.settings, ProviderSettings):
            raise TypeError(f"{self.name}: settings must subclass fleet.spec.ProviderSettings")
        if self.factory is not None and not self.extra:
            raise TypeError(f"{self.name}: an adapter names the pip extra that brings its SDK")
        if self.pulumi_stack and self.pulumi_refusal:
            raise TypeError(f"{self.name}: a Pulumi stack or a refusal, not both")

    @property
    def display(self) -> str:
        return self.title or self.name

    @property
    def has_adapter(self) -> bool:
        return self.factory is not None
