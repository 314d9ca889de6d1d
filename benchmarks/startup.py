"""Start-up time of the ``fleet`` command: what a user waits for before the first line.

Measures, as real subprocesses of the installed ``fleet`` command (median of ``--runs``):

- ``fleet --help``;
- ``fleet status quickstart`` of a 9-instance fleet on a frozen local cloud;
- ``fleet plan examples/h100-multicloud.yaml`` (``backend: cloud``: plans from the shipped snapshot);
- the bare interpreter (``python -c pass``), the floor under all of them;

and, in fresh interpreters, the import time of the MILP solver entry points:
``scipy.optimize`` (what the planner uses) against ``highspy`` (HiGHS's own bindings,
measured only when it is installed) and ``numpy`` (which both import).

Run: ``python benchmarks/startup.py`` (under a minute). Prints the figures and saves
``benchmarks/results/startup.json``.
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
RESULTS = Path(__file__).parent / "results" / "startup.json"
FLEET_BIN = str(Path(sys.executable).with_name("fleet"))

QUICKSTART = """
name: quickstart
backend: local
capacity:
  gpus: 16
  accelerators: [H100, H200]
  on_demand_gpus: 4
providers: [aws, gcp, azure]
diversification:
  min_pools: 3
"""


def _time(cmd: list[str], env: dict[str, str], runs: int, ok: tuple[int, ...] = (0,)) -> float:
    """Median wall time of ``cmd`` over ``runs`` runs (one warm-up run first)."""
    times = []
    for i in range(runs + 1):
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if proc.returncode not in ok:
            raise SystemExit(f"{' '.join(cmd)} -> {proc.returncode}\n{proc.stderr}")
        if i:
            times.append(elapsed)
    return statistics.median(times)


def _import_time(module: str, runs: int) -> float | None:
    """Median seconds to import ``module`` in a fresh interpreter; None when it is not installed."""
    code = (f"import time; t = time.perf_counter(); import {module}; "
            "print(time.perf_counter() - t)")
    times = []
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if proc.returncode != 0:
            return None
        times.append(float(proc.stdout))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per figure (median)")
    args = parser.parse_args()
    figures: dict[str, float | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPOTFLEET_")}
        env.update(SPOTFLEET_HOME=str(home), COLUMNS="100", NO_COLOR="1")
        from providers.local import LocalCloud

        LocalCloud.open(home / "localcloud", time_scale=0.0, seed=0)    # frozen: nothing is preempted
        spec = Path(tmp) / "quickstart.yaml"
        spec.write_text(QUICKSTART)
        subprocess.run([FLEET_BIN, "up", str(spec), "--yes"], env=env, capture_output=True, check=True)

        figures["python_bare_s"] = _time([sys.executable, "-c", "pass"], env, args.runs)
        figures["fleet_help_s"] = _time([FLEET_BIN, "--help"], env, args.runs)
        figures["fleet_status_s"] = _time([FLEET_BIN, "status", "quickstart"], env, args.runs)
        figures["fleet_plan_snapshot_s"] = _time(
            [FLEET_BIN, "plan", str(ROOT / "examples" / "h100-multicloud.yaml")], env, args.runs, ok=(0, 3))
    for module in ("numpy", "scipy.optimize", "highspy"):
        figures[f"import_{module.replace('.', '_')}_s"] = _import_time(module, args.runs)

    print(f"{'load average (1 min)':32} {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for key, value in figures.items():
        print(f"{key:32} {'not installed' if value is None else f'{value:.3f}'}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": platform.platform(), "python": platform.python_version(), "cores": os.cpu_count(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": args.runs,
        "load_average_1m": round(os.getloadavg()[0], 1),
        "figures": figures,
    }, indent=2) + "\n")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
