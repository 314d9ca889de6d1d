"""A fleet with a head on the embedded local cloud: time to a ready fleet (head first, then the
workers) and the queue-workers example's throughput with and without preemptions.

Runs ``examples/queue-workers/run_local.py`` as real subprocesses (real node processes on a
fresh local cloud each time), ``--runs`` times without preemptions and ``--runs`` times with
``--preempt`` workers taken back mid-run, and reports per scenario the median of: seconds
from ``fleet up`` to a ready fleet (head running, workers launched with its address), tasks
per hour, requeues, expired leases and units of work redone; and whether every task finished
exactly once in every run.

Run: ``python benchmarks/roles.py`` (about a minute). Prints the figures and saves
``benchmarks/results/roles.json``. Tasks here are short sleeps, so tasks per hour measure the
queue's and the fleet's overhead, not any real work.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "examples" / "queue-workers" / "run_local.py"
RESULTS = Path(__file__).parent / "results" / "roles.json"


def one(preempt: int, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "SPOTFLEET_HOME": home}
        out = subprocess.run(
            [
                sys.executable,
                str(DRIVER),
                "--tasks",
                str(args.tasks),
                "--units",
                str(args.units),
                "--workers",
                str(args.workers),
                "--preempt",
                str(preempt),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=600,
            check=True,
        )
        return json.loads(out.stdout)


def summary(runs: list[dict]) -> dict:
    med = {
        k: statistics.median(r[k] for r in runs)
        for k in ("ready_seconds", "tasks_per_hour", "preemptions", "requeues", "expired_leases", "redone_units")
    }
    return {
        **med,
        "runs": len(runs),
        "every_task_exactly_once": all(r["exactly_once"] and r["results_correct"] for r in runs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--units", type=int, default=20)
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--preempt", type=int, default=3)
    args = ap.parse_args()
    scenarios = {
        "no preemptions": summary([one(0, args) for _ in range(args.runs)]),
        f"{args.preempt} preemptions": summary([one(args.preempt, args) for _ in range(args.runs)]),
    }
    for name, s in scenarios.items():
        print(
            f"{name:>16}: ready in {s['ready_seconds']:.1f} s, {s['tasks_per_hour']:,.0f} tasks/h, "
            f"{s['preemptions']:g} preempted, {s['requeues']:g} requeued, {s['redone_units']:g} units redone, "
            f"exactly once: {s['every_task_exactly_once']}"
        )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "benchmark": "roles",
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "load_average_1m": round(os.getloadavg()[0], 1),
                "settings": vars(args),
                "scenarios": scenarios,
                "note": "local cloud, real node processes; each task is units x 0.05 s of sleep",
            },
            indent=2,
        )
        + "\n"
    )
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
