"""The offers a fleet's recorded spec would weigh, for the dashboard (what ``fleet offers --spec``
lists): the spec's providers, filtered by its settings, with the interruption rates the fleet
has seen, cheapest per GPU-hour first. Reads through the planning use case
(``offers_for_spec`` and ``learned_rates``), never its own queries; asks the providers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleet.errors import FleetError
from fleet.safetext import safe_data
from fleet.state import FleetRecord

if TYPE_CHECKING:
    from fleet.cli.app import App


def weighed(app: App, record: FleetRecord, *, limit: int = 50) -> dict[str, Any]:
    """``{"source", "detail", "total", "offers": [...the cheapest limit...], "error"}`` for ``record``'s
    spec (``error`` says why there are none: no recorded spec, or the providers failed)."""
    from fleet.cli.lifecycle import spec_of
    from fleet.cli.plan import learned_rates, offers_for_spec, providers_or_none

    spec = spec_of(record)
    if spec is None:
        return {
            "source": "",
            "detail": "",
            "total": 0,
            "offers": [],
            "error": f"fleet {record.name} has no recorded spec; `fleet repair {record.name} --spec SPEC`",
        }
    try:
        providers = providers_or_none(spec, app)
        found, info = offers_for_spec(spec, app, providers)
        found = learned_rates(app, spec, found, providers)
    except FleetError as err:
        return {"source": "", "detail": "", "total": 0, "offers": [], "error": str(err)}
    found.sort(key=lambda o: (o.price_per_gpu_hour, o.pool.id))
    return safe_data(
        {
            "source": info.source,
            "detail": info.detail,
            "total": len(found),
            "error": "",
            "offers": [o.model_dump(mode="json") | {"price_per_gpu_hour": o.price_per_gpu_hour} for o in found[:limit]],
        }
    )
