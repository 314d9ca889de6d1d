"""Rules that keep the code base livable, checked on the source itself.

- The pure core (planning, economics, spec, model) does no I/O: no clock, no randomness,
  no network, no subprocess, no database.
- Cloud SDKs are imported only at the edges: provider adapters and the checkpoint
  storage backends that run on nodes.
- Adapters (``providers/**``) import neither the executor (``fleet.provisioning``), the
  node agent (``fleet.agent``) nor the state store (``fleet.state``): what they share lives in
  the ground layer (``fleet.errors``, ``fleet.api_keys``, ``fleet.sqlitetx``, ...).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE_MODULES = ["fleet/planning/planner.py", "fleet/planning/economics.py", "fleet/spec.py", "fleet/model.py"]
PURE_MODULES += [f"fleet/rebalance/{m}.py" for m in ("decision", "types", "learning", "backoff", "bidding", "bills")]
IMPURE = {
    "time",
    "random",
    "socket",
    "subprocess",
    "sqlite3",
    "httpx",
    "requests",
    "urllib",
    "threading",
    "datetime",
    "os",
    "shutil",
}
CLOUD_SDKS = ("boto3", "botocore", "google.cloud", "azure", "pulumi")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_core_does_no_io(module):
    path = ROOT / module
    if not path.exists():
        pytest.skip(f"{module} not present")
    bad = {m for m in imported_modules(path) if m.split(".")[0] in IMPURE}
    assert not bad, f"{module} imports I/O modules {sorted(bad)}"


def test_cloud_sdks_only_at_the_edges():
    offenders = []
    for path in sorted(ROOT.glob("fleet/**/*.py")) + sorted(ROOT.glob("providers/**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        in_adapter = rel.startswith("providers/") and rel.count("/") >= 2  # providers/<name>/...
        if in_adapter or rel.startswith("fleet/checkpoint/"):
            continue
        for name in imported_modules(path):
            if name.startswith(CLOUD_SDKS):
                offenders.append(f"{rel}: {name}")
    assert not offenders, offenders


#: What an adapter must never import: the executor (``fleet.provisioning``), the node agent and
#: the state store (the providers are the truth; the record is kept above them).
ADAPTER_FORBIDDEN = ("fleet.provisioning", "fleet.agent", "fleet.state")


def imported_names(path: Path) -> set[str]:
    """Modules imported, with ``from package import module`` counted as ``package.module``."""
    names = set(imported_modules(path))
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_adapters_import_neither_the_executor_nor_the_node_agent():
    offenders = []
    for path in sorted(ROOT.glob("providers/**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for name in imported_names(path):
            if any(name == m or name.startswith(m + ".") for m in ADAPTER_FORBIDDEN):
                offenders.append(f"{rel}: {name}")
    assert not offenders, f"adapters import the layers above them: {offenders}"


# ---- the pure core, all of it -------------------------------------------------------------

#: Every module of ``fleet/planning`` is pure (``fleet.catalog``, which reads the clock and live
#: providers, is not in it and is not called pure); ``highs`` is the solver binding: it may hold a
#: lock and silence the native library's banner (file descriptors), nothing else.
PLANNING = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "fleet/planning").glob("*.py"))
SOLVER_BINDING = {"fleet/planning/highs.py": {"os", "threading", "ctypes"}}
#: Ground modules a pure module may import (they do no I/O either; checked below with the rest).
PURE_GROUND = {
    "fleet",
    "fleet.model",
    "fleet.spec",
    "fleet.errors",
    "fleet.accelerators",
    "fleet.secrets",
    "fleet.safetext",
    "fleet.rebalance",
    "fleet.rebalance.head_rule",
    "fleet.budget",
}
#: The one door from the pure core to I/O: ``fleet.spec.load_spec`` reads a spec file through
#: ``fleet.spec_input`` (imported inside it; planning and deciding never call it).
#: ``fleet.rebalance.bills`` reads the state store's record types (plain dataclasses; importing
#: them runs ``fleet/state/__init__``, which loads the store modules: a known leak).
PURE_EDGES = {"fleet/spec.py": {"fleet.spec_input"}, "fleet/rebalance/bills.py": {"fleet.state.records"}}
#: Calls that read the clock (a pure module is given the time).
CLOCK_CALLS = {
    ("time", "time"),
    ("time", "monotonic"),
    ("time", "perf_counter"),
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("date", "today"),
}


def _module_path(name: str) -> Path | None:
    parts = name.split(".")
    for candidate in (ROOT.joinpath(*parts).with_suffix(".py"), ROOT.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def _clock_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if (name, node.func.attr) in CLOCK_CALLS:
                found.append(f"{name}.{node.func.attr}() at line {node.lineno}")
    return found


def _pure_modules() -> list[str]:
    return sorted(set(PLANNING) | set(PURE_MODULES))


def test_every_planning_module_is_guarded():
    """The pure set covers ``fleet/planning`` whole, so a new module there is guarded from the start."""
    assert set(PLANNING) <= set(_pure_modules()) and len(PLANNING) >= 13


@pytest.mark.parametrize("module", _pure_modules())
def test_pure_modules_do_no_io_and_read_no_clock(module):
    path = ROOT / module
    allowed = SOLVER_BINDING.get(module, set())
    bad = {m for m in imported_modules(path) if m.split(".")[0] in (IMPURE | {"ctypes"}) - allowed}
    bad |= {m for m in imported_modules(path) if m.startswith(CLOUD_SDKS)}
    assert not bad, f"{module} imports I/O modules {sorted(bad)}"
    assert not _clock_calls(path), f"{module} reads the clock: {_clock_calls(path)}"


@pytest.mark.parametrize("module", _pure_modules())
def test_pure_modules_import_only_pure_modules(module):
    """What a pure module imports from spotfleet is pure too (or a ground module that does no I/O):
    importing ``fleet.catalog`` for a constant would bring the clock and the providers along."""
    pure = {m.removesuffix(".py").replace("/", ".") for m in _pure_modules()} | PURE_GROUND
    fleet_imports = {m for m in imported_modules(ROOT / module) if m == "fleet" or m.startswith("fleet.")}
    bad = sorted(
        m for m in fleet_imports - PURE_EDGES.get(module, set()) if m not in pure and not m.startswith("fleet.planning")
    )
    assert not bad, f"{module} imports modules that are not pure: {bad}"


#: What the ground under the pure core may hold: ``fleet.secrets`` reads the environment it is
#: given (``os``), ``fleet.safetext`` guards its registry of secret values with a lock.
GROUND_ALLOWED = {"fleet.secrets": {"os"}, "fleet.safetext": {"threading", "os"}}


@pytest.mark.parametrize("module", sorted(PURE_GROUND - {"fleet", "fleet.rebalance"}))
def test_the_ground_under_the_pure_core_does_no_io(module):
    path = _module_path(module)
    assert path is not None, module
    bad = {m for m in imported_modules(path) if m.split(".")[0] in IMPURE - GROUND_ALLOWED.get(module, set())}
    assert not bad, f"{module} imports I/O modules {sorted(bad)}"
    assert not _clock_calls(path), f"{module} reads the clock: {_clock_calls(path)}"


# ---- faces and use cases ------------------------------------------------------------------

#: The CLI modules every command may import: plumbing and shared rendering, no use case logic.
#: ``main`` registers the commands (it imports each command module and nothing else of theirs).
CLI_SHARED = {"app", "tables", "render", "lifecycle", "complete", "durations", "node_options"}
#: The state store's write methods: a command reaches them through ``fleet.operations``.
STORE_WRITES = {
    "save_fleet",
    "set_status",
    "save_plan",
    "mark_plan_applied",
    "begin_launch",
    "finish_launch",
    "record_instances",
    "end_instances",
    "record_event",
    "record_events",
    "block",
    "unblock",
    "acquire_lock",
    "refresh_lock",
    "release_lock",
    "rebuild_rows",
}


def _cli_modules() -> list[Path]:
    return sorted((ROOT / "fleet/cli").glob("*.py"))


def _cli_imports(path: Path) -> set[str]:
    """The ``fleet.cli`` modules ``path`` imports (``from fleet.cli import x`` counted as ``x``)."""
    found = set()
    for name in imported_names(path):
        if name.startswith("fleet.cli."):
            found.add(name.split(".")[2])
    return {m for m in found if (ROOT / "fleet/cli" / f"{m}.py").is_file()}


def test_cli_modules_do_not_import_each_others_logic():
    offenders = []
    for path in _cli_modules():
        if path.stem == "main":
            continue
        for module in sorted(_cli_imports(path) - CLI_SHARED - {path.stem}):
            offenders.append(f"fleet/cli/{path.name} imports fleet.cli.{module}")
    assert not offenders, f"a command's logic belongs in fleet.operations, shared drawing in {CLI_SHARED}: {offenders}"


def test_cli_shared_modules_exist():
    assert all((ROOT / "fleet/cli" / f"{m}.py").is_file() for m in CLI_SHARED)


def test_the_cli_writes_no_state_itself():
    offenders = []
    for path in _cli_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STORE_WRITES:
                offenders.append(f"fleet/cli/{path.name}:{node.lineno} calls .{node.func.attr}()")
    assert not offenders, f"state changes belong in fleet.operations: {offenders}"


def test_nothing_below_the_faces_imports_the_cli():
    """Use cases, views, the dashboard, the rebalancer and the simulator never reach up into
    ``fleet.cli`` (the dashboard and ``fleet status`` share ``fleet.operations.look``)."""
    offenders = []
    for path in sorted(ROOT.glob("fleet/**/*.py")) + sorted(ROOT.glob("providers/**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("fleet/cli/"):
            continue
        offenders += [f"{rel}: {m}" for m in imported_modules(path) if m == "fleet.cli" or m.startswith("fleet.cli.")]
    assert not offenders, offenders


def test_use_cases_import_neither_click_nor_rich():
    offenders = []
    for path in sorted((ROOT / "fleet/operations").glob("*.py")):
        offenders += [f"{path.name}: {m}" for m in imported_modules(path) if m.split(".")[0] in ("click", "rich")]
    assert not offenders, f"fleet.operations returns values; the faces print them: {offenders}"


# ---- docstrings name modules that exist ---------------------------------------------------

#: ``fleet.x.y`` or ``providers.x.y`` quoted in a docstring (``...``, `...` or :role:`~...`).
QUOTED_NAME = re.compile(r"`{1,2}~?((?:fleet|providers|stacks)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`")


def _top_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # ``__all__`` entries served by a module ``__getattr__``
    return names


def _names_a_real_thing(dotted: str) -> bool | None:
    """True when ``dotted`` is a module or a name defined in one; None when it is not a claim
    about a module (``providers.aws.regions``: a spec field path under a provider package)."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        path = _module_path(".".join(parts[:k]))
        if path is None:
            continue
        rest = parts[k:]
        if not rest:
            return True
        if parts[0] == "providers" and k <= 2 and path.name == "__init__.py":
            return None  # providers.<name>[.<field>]: how the spec spells a setting
        return rest[0] in _top_names(path)
    return None if parts[0] == "providers" else False


def test_docstrings_name_modules_that_exist():
    wrong = []
    for path in (
        sorted(ROOT.glob("fleet/**/*.py"))
        + sorted(ROOT.glob("providers/**/*.py"))
        + sorted(ROOT.glob("stacks/**/*.py"))
    ):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node, clean=False) or ""
            for match in QUOTED_NAME.finditer(doc):
                if _names_a_real_thing(match.group(1)) is False:
                    wrong.append(f"{path.relative_to(ROOT)}: {match.group(1)}")
    assert not wrong, f"docstrings name what does not exist: {wrong}"
