"""Where a recorded fleet runs, read from its recorded spec without building the spec model.

The state store keeps each fleet's spec as the JSON that ``FleetSpec.model_dump_json`` wrote
when ``fleet up`` validated it. A command that reads a fleet on the local cloud (``fleet
status``, ``fleet down``) needs only two things from it: the backend and which providers are
enabled. Reading those as plain JSON spares importing ``fleet.spec``, the provider settings
models and building the spec model (about a third of ``fleet status``'s start-up).

``where_recorded(spec_json)`` returns ``None`` for JSON not in the shape a validated spec is
written in (not JSON, a field missing or of the wrong type): the caller then validates the spec
in full (``fleet.cli.lifecycle.spec_of``), which says what is wrong with it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RecordedWhere:
    """A recorded spec's ``backend`` and, per provider it lists, whether it is enabled."""

    backend: str
    providers: Mapping[str, bool]  # empty: the spec lists none, so every provider is allowed

    def allows(self, provider: str) -> bool:
        """Whether the spec allows ``provider``, as ``FleetSpec.provider_settings(provider) is not None``."""
        return not self.providers or self.providers.get(provider, False)


def where_recorded(spec_json: str) -> RecordedWhere | None:
    """The backend and enabled providers of a recorded spec; ``None`` when ``spec_json`` is not
    in the shape a validated spec is written in (see the module doc)."""
    try:
        data = json.loads(spec_json)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    backend, providers = data.get("backend"), data.get("providers")
    if backend not in ("local", "cloud") or not isinstance(providers, dict):
        return None
    enabled: dict[str, bool] = {}
    for name, settings in providers.items():
        if not isinstance(settings, dict) or not isinstance(settings.get("enabled"), bool):
            return None
        enabled[name] = settings["enabled"]
    return RecordedWhere(backend, enabled)
