"""Rules that keep the code base livable, checked on the source itself.

- The pure core (planning, economics, spec, model) does no I/O: no clock, no randomness,
  no network, no subprocess, no database.
- Cloud SDKs are imported only at the edges: provider adapters and the checkpoint
  storage backends that run on nodes.
- Adapters (``providers/**``) import neither the executor (``fleet.provisioning``) nor the
  node agent (``fleet.agent``): what both need lives in the ground layer (``fleet.errors``,
  ``fleet.api_keys``, ...).
"""

from __future__ import annotations

import ast
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


#: What an adapter must never import: the executor (``fleet.provisioning``) and the node agent.
ADAPTER_FORBIDDEN = ("fleet.provisioning", "fleet.agent")


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
