"""The import graph between the layers of /work/shared/DESIGN.md, drawn from the code.

    python benchmarks/import_graph.py          # the layer drawing, then the arrows that break a rule

Every ``import`` and ``from ... import`` in fleet/, providers/ and stacks/ (lazy ones inside
functions too) is read with ``ast``; each module is put in its layer (``LAYERS``, first match
wins) and the arrows between layers are counted. An arrow that goes up (a lower layer importing
a higher one) is listed with the modules at both ends, as are the two rules the architecture
test also keeps: adapters import neither ``fleet.provisioning``, ``fleet.agent`` nor
``fleet.state``, and a CLI module imports no other CLI module's logic (``tests/unit/
test_architecture.py: CLI_SHARED`` names the shared ones).
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (layer, module prefixes), top to bottom; a module belongs to the first layer that names it (a
#: prefix names itself and what is under it; one ending in ``=`` names only itself).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("faces", ("fleet.cli", "stacks", "fleet.dashboard")),
    ("use cases", ("fleet.operations", "fleet.views", "fleet.simulate")),
    ("doing", ("fleet.provisioning", "fleet.nodelogs")),
    ("deciding", ("fleet.planning", "fleet.rebalance")),
    ("ports", ("providers=", "providers.base", "providers.registry")),
    ("adapters", ("providers",)),
    ("records", ("fleet.state", "fleet.checkpoint", "fleet.agent")),
    ("ground", ("fleet",)),
]
ORDER = [name for name, _ in LAYERS]
#: Arrows up that are the design, not a slip: the rebalancer's pass drives the executor
#: (``fleet.rebalance.cycle``), the catalog asks live providers; both are named in DESIGN.md.
#: An adapter implements the port (``providers.base``) it sits under.
KNOWN_UP = {("deciding", "doing"), ("ground", "ports"), ("ground", "adapters"), ("adapters", "ports")}
CLI_SHARED = {"app", "tables", "render", "lifecycle", "complete", "durations", "node_options"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _names(prefix: str, module: str) -> bool:
    if prefix.endswith("="):
        return module == prefix[:-1]
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> str:
    for name, prefixes in LAYERS:
        if any(_names(p, module) for p in prefixes):
            return name
    return ""


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in found if m.split(".")[0] in ("fleet", "providers", "stacks")}


def graph() -> list[tuple[str, str]]:
    files = [*ROOT.glob("fleet/**/*.py"), *ROOT.glob("providers/**/*.py"), *ROOT.glob("stacks/**/*.py")]
    modules = {module_name(p) for p in files}
    edges = []
    for path in sorted(files):
        src = module_name(path)
        for target in imports(path):
            while target not in modules and "." in target:  # `from pkg import name` -> pkg
                target = target.rsplit(".", 1)[0]
            if target in modules and target != src:
                edges.append((src, target))
    return edges


def main() -> int:
    edges = graph()
    between = Counter((layer_of(a), layer_of(b)) for a, b in edges)
    print("layers, top to bottom; an arrow is 'imports' (count of module pairs)")
    for i, name in enumerate(ORDER):
        downs = [f"{to} x{between[(name, to)]}" for to in ORDER[i + 1 :] if between[(name, to)]]
        print(f"  {name:10} -> {', '.join(downs) or '-'}")
    broken, upward = [], []
    for a, b in edges:
        la, lb = layer_of(a), layer_of(b)
        if ORDER.index(lb) < ORDER.index(la) and (la, lb) not in KNOWN_UP:
            upward.append(f"{a} ({la}) -> {b} ({lb})")
        if la == "adapters" and b.startswith(("fleet.provisioning", "fleet.agent", "fleet.state")):
            broken.append(f"adapter: {a} -> {b}")
        if (
            a.startswith("fleet.cli.")
            and b.startswith("fleet.cli.")
            and a != "fleet.cli.main"
            and b.split(".")[2] not in CLI_SHARED
        ):
            broken.append(f"cli logic: {a} -> {b}")
    known = sorted({f"{la} -> {lb}" for a, b in edges if (la := layer_of(a), lb := layer_of(b)) in KNOWN_UP})
    print(f"arrows up by design: {', '.join(known) or 'none'}")
    cli: dict[str, set[str]] = {}
    for a, b in edges:
        if a.startswith("fleet.cli.") and b.startswith("fleet.cli.") and a != "fleet.cli.main":
            cli.setdefault(b.removeprefix("fleet.cli."), set()).add(a.removeprefix("fleet.cli."))
    print("CLI -> CLI imports, by the module imported (fleet.cli.main, the command registry, left out):")
    for target, sources in sorted(cli.items()):
        mark = "" if target in CLI_SHARED else "   <- NOT a shared module"
        print(f"  {target:12} <- {len(sources):2} command module(s){mark}")
    adapters = Counter(
        layer_of(b) + ": " + ".".join(b.split(".")[:2])
        for a, b in edges
        if layer_of(a) == "adapters" and b.startswith("fleet.")
    )
    print("what adapters import from fleet (layer: package, module pairs):")
    print("  " + ", ".join(f"{k} x{n}" for k, n in sorted(adapters.items())))
    print(f"other arrows up (noticed, not rules): {len(set(upward))}")
    for line in sorted(set(upward)):
        print(f"  {line}")
    print(f"rule breaks (adapter -> provisioning/agent/state, CLI -> CLI logic): {len(set(broken))}")
    for line in sorted(set(broken)):
        print(f"  {line}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
