"""A ``fleet simulate --save`` result, kept per fleet name for the dashboard.

``save(home, fleet, data)`` writes ``<home>/simulations/<fleet>.json`` (private: 0600 in a 0700
folder) holding the result exactly as ``fleet simulate --json`` prints it, with when it was saved;
a newer save replaces it. ``load(home, fleet)`` returns ``{"saved_at", "result"}``, ``None``
when none was saved, or ``{"error": ...}`` for a file that is not such a result (never a
traceback on the page).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from fleet.private import private_dir, write_private


def path_of(home: Path, fleet: str) -> Path:
    return Path(home) / "simulations" / f"{fleet}.json"


def save(home: Path, fleet: str, data: dict[str, Any]) -> Path:
    """Keep ``data`` (``fleet simulate --json``'s result) for ``fleet``; returns the file written."""
    path = path_of(home, fleet)
    private_dir(path.parent)
    write_private(path, json.dumps({"fleet": fleet, "saved_at": time.time(), "result": data}, default=str))
    return path


def load(home: Path, fleet: str) -> dict[str, Any] | None:
    """The saved result of ``fleet`` (see the module doc)."""
    path = path_of(home, fleet)
    if not path.is_file():
        return None
    try:
        got = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return {"error": f"{path}: cannot read the saved simulation ({err}); run `fleet simulate SPEC --save` again"}
    ok = (
        isinstance(got, dict)
        and isinstance(got.get("result"), dict)
        and isinstance(got["result"].get("policies"), list)
        and isinstance(got.get("saved_at"), (int, float))
    )
    if not ok:
        return {"error": f"{path} is not a saved simulation; run `fleet simulate SPEC --save` again"}
    return {"saved_at": got["saved_at"], "result": got["result"]}
