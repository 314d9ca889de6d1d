"""What every ``benchmarks/<provider>_launch.py`` measures against its provider's HTTP fake: the
installed ``fleet up`` as a subprocess, then polling the adapter until every node runs.

:func:`measure` runs one ``fleet up`` of ``spec`` (the fleet ``fleet``) with ``env`` pointing at
the fake, reads the fake's ``/_control/calls`` (API calls per route), polls ``running()`` (the
number of the fleet's nodes the adapter lists as running) until ``nodes`` run, and ends the fleet
with ``fleet down``. Returns the figures the launch benchmarks save.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))


def measure(
    url: str,
    spec: str,
    fleet: str,
    nodes: int,
    env: Mapping[str, str],
    drop: tuple[str, ...],
    running: Callable[[], int],
) -> dict:
    """One launch of ``spec`` against the fake at ``url`` (see the module doc); ``drop``: prefixes of
    this machine's variables to leave out of ``fleet``'s environment."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{fleet}.yaml"
        path.write_text(spec)
        full = {k: v for k, v in os.environ.items() if not k.startswith(("SPOTFLEET_", *drop))}
        full.update(SPOTFLEET_HOME=str(Path(tmp) / "home"), HOME=tmp, **env)
        start = time.perf_counter()
        proc = subprocess.run(
            [FLEET_BIN, "up", str(path), "--yes", "--json"], env=full, capture_output=True, text=True, timeout=600
        )
        up_done = time.perf_counter()
        if proc.returncode != 0:
            raise SystemExit(f"fleet up failed ({proc.returncode}): {proc.stderr[-2000:]}")
        calls = httpx.get(f"{url}/_control/calls").json()
        polls = 0
        while True:
            polls += 1
            if running() >= nodes:
                break
            time.sleep(0.1)
        all_running = time.perf_counter()
        report = json.loads(proc.stdout)
        subprocess.run([FLEET_BIN, "down", fleet, "--yes", "--json"], env=full, capture_output=True, timeout=600)
    return {
        "launched": len(report["launched"]),
        "up_seconds": round(up_done - start, 3),
        "to_running_seconds": round(all_running - start, 3),
        "api_calls_during_up": calls["total"],
        "api_calls_per_instance": round(calls["total"] / nodes, 2),
        "calls_by_route": calls["calls"],
        "status_polls_until_running": polls,
    }
