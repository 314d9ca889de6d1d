"""`fleet dashboard` page load time for a fleet of 1,000 instances and 10,000 events, on the
embedded local cloud (frozen clock, as ``benchmarks/lifecycle.py`` builds it).

The fleet is brought up with the installed ``fleet`` command; 50 of its spot instances are
then preempted and seen gone by ``fleet status`` (so the timeline has 50 rows), and the
event log is topped up to 10,000 with rebalancer-action events. The dashboard is served in
process (stdlib ``ThreadingHTTPServer`` on 127.0.0.1) and each figure is the median of
``--repeat`` loads over HTTP: the fleet page (HTML), its JSON endpoint (what the page polls),
and the fleets page; with Debian's ``chromium`` installed also the time headless Chromium
takes to load the fleet page and run its script (process start-up included).

A poll within ``--look-every`` reuses the last look at the providers; ``?refresh=1`` looks (and
reconciles) again. Both are loaded in interleaved rounds and compared as a ratio (wall and
this process's CPU time, the server being in process), with the load average beside them.

Run: ``python benchmarks/dashboard.py`` (a minute or two on two cores). Prints the figures
and saves ``benchmarks/results/dashboard.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import print_and_save  # noqa: E402
from lifecycle import World  # noqa: E402

from fleet.cli.app import App  # noqa: E402
from fleet.dashboard.server import Dashboard, Source  # noqa: E402
from fleet.state import open_store  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "dashboard.json"
INSTANCES, EVENTS, PREEMPTED = 1000, 10_000, 50


def build(tmp: Path) -> World:
    world = World(tmp / "dash", latency=0.0, instances=INSTANCES, pools=40)
    _, report = world.fleet("up", str(world.spec_path), "--yes", "--max-cost", "1000000")
    assert report["ok"] and len(report["launched"]) == INSTANCES
    for victim in sorted(report["launched"])[:PREEMPTED]:
        world.cloud.preempt(victim)
    world.cloud.advance(60)
    world.fleet("status", world.name)
    store = open_store(str(world.home / "state.db"))
    have = len(store.events(world.name))
    now = world.cloud.now()
    store.record_events(
        (
            world.name,
            "rebalance",
            f"i-{k}",
            "aws/us-east-1/use1-az1/p5.48xlarge/spot",
            {"kind": "replace", "reason": "risk", "done": k % 3 == 0, "message": "benchmark"},
            now - k,
        )
        for k in range(EVENTS - have)
    )
    assert len(store.events(world.name)) == EVENTS
    store.close()
    return world


def timed(url: str, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=600) as r:
            r.read()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def interleaved(urls: dict[str, str], repeat: int) -> dict[str, tuple[float, float]]:
    """Name -> (median wall seconds, median CPU seconds of this process) over ``repeat`` rounds,
    each round loading every URL once in turn."""
    wall: dict[str, list[float]] = {k: [] for k in urls}
    cpu: dict[str, list[float]] = {k: [] for k in urls}
    for _ in range(repeat):
        for name, url in urls.items():
            w, c = time.perf_counter(), time.process_time()
            with urllib.request.urlopen(url, timeout=600) as r:
                r.read()
            wall[name].append(time.perf_counter() - w)
            cpu[name].append(time.process_time() - c)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in urls}


def main() -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="loads to take the median of")
    args = parser.parse_args()
    out: dict[str, float] = {"instances": INSTANCES, "events": EVENTS, "lost_nodes": PREEMPTED}
    with tempfile.TemporaryDirectory() as tmp_name:
        world = build(Path(tmp_name))
        server = Dashboard(Source(App(home=world.home)), "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = server.url
        try:
            page = base + f"fleet/{world.name}"
            with urllib.request.urlopen(page, timeout=600) as r:
                out["fleet_page_bytes"] = len(r.read())
            out["fleet_page_median_s"] = timed(page, args.repeat)
            out["fleet_json_median_s"] = timed(base + f"api/fleet/{world.name}", args.repeat)
            out["fleets_page_median_s"] = timed(base, args.repeat)
            api = base + f"api/fleet/{world.name}"
            polls = interleaved({"cached": api, "look": api + "?refresh=1"}, args.repeat)
            out["poll_cached_median_s"], out["poll_cached_cpu_s"] = polls["cached"]
            out["poll_look_median_s"], out["poll_look_cpu_s"] = polls["look"]
            out["poll_look_over_cached_wall"] = polls["look"][0] / polls["cached"][0]
            out["poll_look_over_cached_cpu"] = polls["look"][1] / max(polls["cached"][1], 1e-6)
            out["load_average_1m"] = os.getloadavg()[0]
            browser = shutil.which("chromium")
            if browser:
                runs = []
                for k in range(args.repeat):
                    started = time.perf_counter()
                    subprocess.run(
                        [
                            browser,
                            "--headless",
                            "--no-sandbox",
                            "--disable-gpu",
                            "--disable-dev-shm-usage",
                            f"--user-data-dir={Path(tmp_name) / f'profile{k}'}",
                            "--dump-dom",
                            page,
                        ],
                        capture_output=True,
                        timeout=600,
                        check=True,
                    )
                    runs.append(time.perf_counter() - started)
                out["chromium_load_fleet_page_median_s"] = statistics.median(runs)
        finally:
            server.shutdown()
            server.server_close()
    return out


if __name__ == "__main__":
    print_and_save(main(), RESULTS)
