"""The start-up budget of the ``fleet`` command, pinned as the modules each command imports (never
as time): each runs in a fresh interpreter, as the installed command does, and reports every
module it ended with. ``benchmarks/startup.py`` measures the time these modules cost.

- ``fleet --help`` imports no pydantic, rich, spec or model code.
- ``fleet status NAME`` of a fleet on the local cloud builds no spec and imports no planner,
  no catalog or traces (a frozen cloud models no pool), no provider package or registry, no
  YAML, no PostgreSQL store and no emoji table.
- ``fleet plan SPEC`` imports the planner (HiGHS through ``highspy``), but no scipy and no emoji
  table.
"""

from __future__ import annotations

import json
import subprocess
import sys

from cli.world import SMALL_SPEC, World

#: Runs ``fleet ARGS...`` in this interpreter and writes the names of every module it imported,
#: as JSON, to the file named first (at exit, so a command that exits non-zero still reports).
MODULES_OF = """
import atexit, json, sys

def _report(path=sys.argv[1]):
    with open(path, "w") as out:
        json.dump(sorted(sys.modules), out)

atexit.register(_report)
sys.argv = ["fleet", *sys.argv[2:]]
from fleet.cli.main import main
main()
"""

#: Every adapter package (``providers.registry.PACKAGES``), which a local fleet's status never needs.
ADAPTERS = ("providers.aws", "providers.gcp", "providers.azure", "providers.vast", "providers.oci",
            "providers.lambda_cloud", "providers.runpod")


def modules_of(world: World, *args: str, ok: tuple[int, ...] = (0,)) -> set[str]:
    report = world.root / "modules.json"
    proc = subprocess.run([sys.executable, "-c", MODULES_OF, str(report), *args], env=world.env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in ok, f"fleet {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return set(json.loads(report.read_text()))


def imported(modules: set[str], *packages: str) -> list[str]:
    """The ``modules`` that are one of ``packages`` or inside one."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_help_imports_neither_pydantic_nor_rich(world: World):
    modules = modules_of(world, "--help")
    assert "fleet.cli.main" in modules
    assert imported(modules, "pydantic", "rich", "fleet.spec", "fleet.model", "yaml", "numpy") == []


def test_status_of_a_local_fleet_imports_only_what_it_reads(world: World):
    spec = world.spec("small", SMALL_SPEC)
    up = world.fleet("up", str(spec), "--yes")
    assert up.returncode == 0, up.stderr
    modules = modules_of(world, "status", "small")
    assert {"fleet.cli.status", "providers.local", "rich.console"} <= modules      # it did run and print
    assert imported(modules, "highspy", "numpy", "scipy", "fleet.planning", "fleet.catalog", "fleet.traces",
                    "fleet.spec", "yaml", "providers.registry", "providers.kit.record", *ADAPTERS,
                    "fleet.state.postgres", "rich._emoji_codes") == []


def test_plan_imports_highspy_not_scipy(world: World):
    modules = modules_of(world, "plan", str(world.spec("small", SMALL_SPEC)), ok=(0, 3))
    assert {"fleet.planning.planner", "highspy"} <= modules
    assert imported(modules, "scipy", "rich._emoji_codes") == []
