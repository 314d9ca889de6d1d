"""Spot interruption estimates from the public AWS Spot Advisor data (cached on disk).

``spot-advisor-data.json`` gives, per region and instance type, a band ``r`` of the monthly
interruption frequency (0: <5%, 1: 5-10%, 2: 10-15%, 3: 15-20%, 4: >20%). A band becomes a rate
per instance-hour from the middle of its range (a month is 730 h). When the file cannot be
fetched (no network, or an emulator endpoint is set) :func:`load` returns ``None`` and the
caller keeps the provider prior.
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

URL = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
TTL_SECONDS = 24 * 3600
#: Middle of each band's monthly interruption fraction.
BAND_MIDPOINTS = (0.025, 0.075, 0.125, 0.175, 0.25)
HOURS_PER_MONTH = 730.0


def band_rate(band: int) -> float:
    """Interruptions per instance-hour for Spot Advisor band ``band`` (0..4)."""
    frac = BAND_MIDPOINTS[max(0, min(band, len(BAND_MIDPOINTS) - 1))]
    return -math.log(1.0 - frac) / HOURS_PER_MONTH


def load(cache_dir: Path, *, timeout: float = 3.0) -> dict[str, Any] | None:
    """The advisor document (from the cache when fresh), or None when it cannot be had."""
    path = cache_dir / "spot-advisor-data.json"
    try:
        if time.time() - path.stat().st_mtime < TTL_SECONDS:
            return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    if os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_EC2"):
        return None  # an emulator: the public internet is not the account's world
    try:
        with urllib.request.urlopen(URL, timeout=timeout) as resp:
            doc = json.loads(resp.read())
    except (OSError, ValueError):
        return None
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))
    except OSError:
        pass
    return doc


def rates(doc: dict[str, Any] | None, region: str) -> dict[str, float]:
    """Instance type -> interruptions per hour in ``region`` (empty without a document)."""
    if not doc:
        return {}
    table = doc.get("spot_advisor", {}).get(region, {}).get("Linux", {})
    return {itype: band_rate(int(v.get("r", 4))) for itype, v in table.items() if isinstance(v, dict)}
