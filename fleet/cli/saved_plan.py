"""A plan saved by ``fleet plan SPEC --out FILE`` and applied exactly by ``fleet up FILE``
(as ``terraform apply plan.out``).

The file is the plan's JSON (``Plan.to_json``: pools, counts and the offers with the prices it
was made on, and the spec's hash) plus ``spec``, the spec it was made for (``--strategy``
applied), ``spec_path``, where that spec was read from, and ``spec_file_hash``, the hash of
that file's spec. ``fleet up FILE`` applies that spec and those counts exactly (no replanning
when a launch fails: the fleet then ends short), and refuses, with one line naming what changed
and the fix (plan again), when the spec file now says something else or an offer the plan
uses is gone or has another price.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fleet.errors import FleetError, SpecError
from fleet.model import Offer, Plan
from fleet.spec import FleetSpec, load_spec

#: The keys a saved plan adds to ``Plan.to_json`` (``Plan.from_json`` reads past them).
SPEC_KEY, SPEC_PATH_KEY, SPEC_FILE_HASH_KEY = "spec", "spec_path", "spec_file_hash"

#: Prices closer than this (in $/h) are the same price (they went through JSON and back).
PRICE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class SavedPlan:
    path: Path
    plan: Plan
    spec: FleetSpec
    spec_path: str
    spec_file_hash: str

    def replan_hint(self) -> str:
        spec = self.spec_path or "SPEC"
        return f"plan again with `fleet plan {spec} --out {self.path}`, then `fleet up {self.path}`"


def write(path: Path, plan: Plan, spec: FleetSpec, spec_path: str, file_hash: str) -> None:
    """Save ``plan`` with the spec it was made for, read from ``spec_path`` (whose own spec,
    before any ``--strategy``, hashes to ``file_hash``)."""
    data = json.loads(plan.to_json())
    data[SPEC_KEY] = spec.model_dump(mode="json")
    data[SPEC_PATH_KEY] = str(Path(spec_path).resolve())
    data[SPEC_FILE_HASH_KEY] = file_hash
    try:
        path.write_text(json.dumps(data, indent=2) + "\n")
    except OSError as err:
        raise FleetError(f"cannot write the plan to {path}: {err.strerror}") from None


def _json_object(path: Path) -> dict[str, Any] | None:
    if path.suffix.lower() != ".json" or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_saved_plan(path: str) -> bool:
    """Whether ``path`` holds a plan (a JSON object with ``allocations`` and ``spec_hash``)
    rather than a spec (a spec has neither field)."""
    data = _json_object(Path(path))
    return data is not None and "allocations" in data and "spec_hash" in data


def read(path: str) -> SavedPlan:
    """The saved plan at ``path``; FleetError when it cannot be applied as it is."""
    where = Path(path)
    data = _json_object(where) or {}
    if not isinstance(data.get(SPEC_KEY), dict):
        raise FleetError(
            f"{path} is a plan without the spec it was made for (`fleet plan --json` output); "
            f"save one with `fleet plan SPEC --out {path}`"
        )
    try:
        spec = FleetSpec.model_validate(data[SPEC_KEY])
        plan = Plan.from_json(json.dumps(data))
    except ValidationError as err:
        raise FleetError(
            f"{path} is not a plan this version can apply ({err.errors()[0]['msg']}); "
            f"plan again with `fleet plan SPEC --out {path}`"
        ) from None
    saved = SavedPlan(
        path=where,
        plan=plan,
        spec=spec,
        spec_path=str(data.get(SPEC_PATH_KEY) or ""),
        spec_file_hash=str(data.get(SPEC_FILE_HASH_KEY) or plan.spec_hash),
    )
    if spec.spec_hash() != plan.spec_hash:
        raise FleetError(
            f"{path} was edited: its spec does not hash to the plan's ({plan.spec_hash}); {saved.replan_hint()}"
        )
    _check_spec_file(saved)
    return saved


def _check_spec_file(saved: SavedPlan) -> None:
    """Refuse when the spec file the plan was made from now says something else (applying the
    old plan would undo that edit); a spec file that is gone leaves the saved spec to apply."""
    if not saved.spec_path or not Path(saved.spec_path).is_file():
        return
    try:
        now = load_spec(saved.spec_path)
    except SpecError as err:
        raise FleetError(
            f"the spec {saved.spec_path} changed since {saved.path} was made and no longer "
            f"validates ({err}); fix it, then {saved.replan_hint()}"
        ) from None
    if now.spec_hash() != saved.spec_file_hash:
        raise FleetError(
            f"the spec {saved.spec_path} changed since {saved.path} was made (hash "
            f"{saved.spec_file_hash}, now {now.spec_hash()}); {saved.replan_hint()}"
        )


def stale_offers(plan: Plan, offers: Iterable[Offer]) -> list[str]:
    """What changed in the offers ``plan`` uses, one phrase per pool (empty: none changed)."""
    now = {o.pool.id: o for o in offers}
    changed = []
    for a in plan.allocations:
        if a.count <= 0:
            continue
        pool, then = a.offer.pool.id, a.offer.price_per_hour
        current = now.get(pool)
        if current is None:
            changed.append(f"{pool} is no longer offered")
        elif abs(current.price_per_hour - then) > PRICE_TOLERANCE:
            changed.append(f"{pool} costs ${current.price_per_hour:,.4f}/h now, ${then:,.4f}/h when planned")
    return changed


def check_offers(saved: SavedPlan, offers: Iterable[Offer]) -> None:
    """FleetError naming what changed when the offers ``saved`` was made on have changed."""
    changed = stale_offers(saved.plan, offers)
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise FleetError(
            f"{saved.path} is out of date: {changed[0]}{more}; nothing was launched; {saved.replan_hint()}"
        )
