"""The control API every HTTP fake under ``tests/fakes`` serves at ``/_control/<path>``.

``control(fake, path)`` GETs it (read the fake's state); ``control(fake, path, body)`` POSTs ``body``
(reset, faults, capacity, foreign resources). Either way the fake's JSON answer, or
``httpx.HTTPStatusError`` when the fake refused. ``fake`` is the server's base URL or a running
fake (anything with a ``url``).
"""

from __future__ import annotations

from typing import Any

import httpx


def control(fake: Any, path: str, body: dict | None = None) -> Any:
    endpoint = f"{fake if isinstance(fake, str) else fake.url}/_control/{path}"
    resp = httpx.post(endpoint, json=body) if body is not None else httpx.get(endpoint)
    resp.raise_for_status()
    return resp.json()
