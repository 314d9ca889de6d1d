"""Start-up time of the ``fleet`` command: what a user waits for before the first line.

Measures, as real subprocesses of the installed ``fleet`` command (median wall and CPU time of
``--runs``, and how many modules each imports):

- ``fleet --help``;
- ``fleet status quickstart`` of a 9-instance fleet on a frozen local cloud;
- ``fleet plan examples/h100-multicloud.yaml`` (``backend: cloud``: plans from the shipped snapshot);
- the bare interpreter (``python -c pass``), the floor under all of them;

and, in fresh interpreters, the import time of the MILP solver entry points: ``highspy``
(HiGHS's own bindings, what the planner calls; measured only when it is installed) against
``scipy.optimize`` (what it called before, still used by ``fleet simulate``'s optimum) and
``numpy`` (which both import).

With ``--baseline DIR`` (another checkout of spotfleet, e.g. ``git worktree add /tmp/before main``)
every command is also run from that checkout, in alternate rounds with this one (so both see the
same load), and the figures are given as ratios: this checkout's median over the baseline's.
Each checkout is put first on ``PYTHONPATH`` for its own runs (this one too, without
``--baseline``), so the code measured is the checkout's, whichever spotfleet is installed.

Every command runs with bytecode caching on, as an installed ``fleet`` does (an inherited
``PYTHONDONTWRITEBYTECODE`` would recompile spotfleet's own modules at every run): the cache
goes to a temporary ``PYTHONPYCACHEPREFIX`` and the warm-up run fills it.

Run: ``python benchmarks/startup.py [--baseline DIR]`` (a minute or two). Prints the figures and
saves ``benchmarks/results/startup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
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


def _time(
    cmd: list[str], envs: list[dict[str, str]], runs: int, ok: tuple[int, ...] = (0,)
) -> list[tuple[float, float]]:
    """Median wall time and median CPU time (user + system) of ``cmd`` over ``runs`` runs under
    each of ``envs`` (one warm-up run each first), the environments taking turns run by run so
    that they share the machine's load alike. CPU time says more than wall time on a loaded
    machine."""
    times: list[list[float]] = [[] for _ in envs]
    cpus: list[list[float]] = [[] for _ in envs]
    for i in range(runs + 1):
        for k, env in enumerate(envs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            elapsed = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if proc.returncode not in ok:
                raise SystemExit(f"{' '.join(cmd)} -> {proc.returncode}\n{proc.stderr}")
            if i:
                times[k].append(elapsed)
                cpus[k].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return [(statistics.median(t), statistics.median(c)) for t, c in zip(times, cpus)]


def _modules(cmd: list[str], env: dict[str, str]) -> int:
    """How many modules the ``fleet`` command ``cmd`` imports (``python -X importtime``)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *cmd], env=env, capture_output=True, text=True)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("import time:")]
    return len(lines) - 1  # less the header line


def _import_time(module: str, runs: int) -> float | None:
    """Median seconds to import ``module`` in a fresh interpreter; None when it is not installed."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    times = []
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if proc.returncode != 0:
            return None
        times.append(float(proc.stdout))
    return statistics.median(times)


def _tree_env(base: dict[str, str], tree: Path, pycache: Path) -> dict[str, str]:
    """``base`` with ``tree`` first on ``PYTHONPATH`` and its own bytecode cache."""
    path = os.pathsep.join(p for p in (str(tree), base.get("PYTHONPATH", "")) if p)
    return {**base, "PYTHONPATH": path, "PYTHONPYCACHEPREFIX": str(pycache)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per figure (median)")
    parser.add_argument("--baseline", type=Path, help="another spotfleet checkout to compare with, run by run")
    args = parser.parse_args()
    figures: dict[str, float | None] = {}
    baseline: dict[str, float] = {}
    modules: dict[str, int] = {}
    baseline_modules: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPOTFLEET_") and k != "PYTHONDONTWRITEBYTECODE"}
        env.update(SPOTFLEET_HOME=str(home), COLUMNS="100", NO_COLOR="1")
        envs = [_tree_env(env, ROOT, Path(tmp) / "pycache")]
        if args.baseline is not None:
            envs.append(_tree_env(env, args.baseline.resolve(), Path(tmp) / "pycache-baseline"))
        from providers.local import LocalCloud

        LocalCloud.open(home / "localcloud", time_scale=0.0, seed=0)  # frozen: nothing is preempted
        spec = Path(tmp) / "quickstart.yaml"
        spec.write_text(QUICKSTART)
        subprocess.run([FLEET_BIN, "up", str(spec), "--yes"], env=envs[0], capture_output=True, check=True)

        commands = {
            "python_bare": ([sys.executable, "-c", "pass"], (0,)),
            "fleet_help": ([FLEET_BIN, "--help"], (0,)),
            "fleet_status": ([FLEET_BIN, "status", "quickstart"], (0,)),
            "fleet_plan_snapshot": ([FLEET_BIN, "plan", str(ROOT / "examples" / "h100-multicloud.yaml")], (0, 3)),
        }
        for name, (cmd, ok) in commands.items():
            measured = _time(cmd, envs if name != "python_bare" else envs[:1], args.runs, ok)
            figures[f"{name}_s"], figures[f"{name}_cpu_s"] = measured[0]
            if len(measured) > 1:
                baseline[f"{name}_s"], baseline[f"{name}_cpu_s"] = measured[1]
            if name != "python_bare":
                modules[name] = _modules(cmd, envs[0])
                if len(envs) > 1:
                    baseline_modules[name] = _modules(cmd, envs[1])
    for module in ("numpy", "scipy.optimize", "highspy"):
        figures[f"import_{module.replace('.', '_')}_s"] = _import_time(module, args.runs)

    load = os.getloadavg()[0]
    print(f"{'load average (1 min)':32} {load:.1f} on {os.cpu_count()} cores")
    ratios = {key: value / baseline[key] for key, value in figures.items() if key in baseline and value}
    for key, value in figures.items():
        versus = f"   {ratios[key]:.2f}x the baseline's {baseline[key]:.3f}" if key in ratios else ""
        print(f"{key:32} {'not installed' if value is None else f'{value:.3f}'}{versus}")
    for key, count in modules.items():
        versus = f"   baseline {baseline_modules[key]}" if key in baseline_modules else ""
        print(f"{key + ' modules':32} {count}{versus}")
    RESULTS.parent.mkdir(exist_ok=True)
    result = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": args.runs,
        "load_average_1m": round(load, 1),
        "figures": figures,
        "modules_imported": modules,
    }
    if args.baseline is not None:
        result["baseline"] = {
            "checkout": str(args.baseline),
            "figures": baseline,
            "modules_imported": baseline_modules,
            "ratios": {key: round(r, 3) for key, r in ratios.items()},
        }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
