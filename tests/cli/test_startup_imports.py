"""The start-up budget of the ``fleet`` command, pinned as the modules each command imports (never
as time): each runs in a fresh interpreter, as the installed command does, and reports every
module it ended with. ``benchmarks/startup.py`` measures the time these modules cost.

- ``fleet --help`` imports no pydantic, rich, spec or model code.
- ``fleet status NAME`` of a fleet on the local cloud builds no spec and imports no planner,
  no catalog or traces (a frozen cloud models no pool), no provider package or registry, no
  YAML, no PostgreSQL store and no emoji table.
  It builds no pydantic model either (the stored plan is read as plain data, the local cloud's
  rows as unvalidated instances): building the first one imports pydantic's plugin loader and
  with it ``importlib.metadata``.
- ``fleet plan SPEC`` imports the planner (HiGHS through ``highspy``), but no scipy and no emoji
  table.
- ``fleet plan`` of a cloud spec that falls back to the price snapshot (here: GCP has no
  project) imports no adapter: the cheap refusal comes before the first adapter is built.
- ``fleet plan`` of a local spec reads only the records of the providers it names (whether each
  sells spot) and opens a SQLite store without importing the PostgreSQL one.
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
ADAPTERS = (
    "providers.aws",
    "providers.gcp",
    "providers.azure",
    "providers.vast",
    "providers.oci",
    "providers.lambda_cloud",
    "providers.runpod",
)


def modules_of(world: World, *args: str, ok: tuple[int, ...] = (0,)) -> set[str]:
    report = world.root / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", MODULES_OF, str(report), *args],
        env=world.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
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
    assert {"fleet.cli.status", "providers.local", "rich.console"} <= modules  # it did run and print
    assert (
        imported(
            modules,
            "highspy",
            "numpy",
            "scipy",
            "fleet.planning",
            "fleet.catalog",
            "fleet.traces",
            "fleet.spec",
            "yaml",
            "providers.registry",
            "providers.kit.record",
            *ADAPTERS,
            "fleet.state.postgres",
            "rich._emoji_codes",
            "pydantic.plugin._loader",
            "importlib.metadata",
        )
        == []
    )


def test_plan_imports_highspy_not_scipy(world: World):
    modules = modules_of(world, "plan", str(world.spec("small", SMALL_SPEC)), ok=(0, 3))
    assert {"fleet.planning.planner", "highspy"} <= modules
    assert imported(modules, "scipy", "rich._emoji_codes") == []


#: A cloud spec whose first provider's adapter imports its own modules when built (AWS) and whose
#: second cannot be set up here (GCP, without a project): ``fleet plan`` prices both from the snapshot.
NO_GCP_PROJECT_SPEC = """
name: {name}
capacity:
  gpus: 16
  accelerators: [H100]
providers:
  aws: {{regions: [us-east-1]}}
  gcp: {{regions: [us-central1]}}
"""

#: Everything that would tell ``google.auth`` or the adapter where a GCP project is.
GCP_PROJECT_SOURCES = (
    "GOOGLE_CLOUD_PROJECT",
    "CLOUDSDK_CORE_PROJECT",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SPOTFLEET_GCE_ENDPOINT",
    "GAE_ENV",
    "GAE_APPLICATION",
    "K_SERVICE",
    "FUNCTION_TARGET",
    "CLOUD_RUN_JOB",
    "GCE_METADATA_HOST",
    "GCE_METADATA_IP",
)


def test_plan_that_falls_back_to_the_snapshot_builds_no_adapter(world: World, monkeypatch):
    for name in GCP_PROJECT_SOURCES:
        monkeypatch.delenv(name, raising=False)
    gcloud = world.root / "gcloud"  # no application-default credentials in it
    gcloud.mkdir()
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(gcloud))
    spec = world.spec("cloudy", NO_GCP_PROJECT_SPEC)
    shown = world.fleet("plan", str(spec), env=world.env())
    assert shown.returncode in (0, 3), shown.stderr
    assert "snapshot" in shown.stdout  # it did fall back
    modules = modules_of(world, "plan", str(spec), ok=(0, 3))
    assert {"providers.aws", "providers.gcp", "fleet.planning.planner"} <= modules
    assert imported(modules, "providers.aws.provider", "providers.gcp.provider", "boto3", "botocore") == []


#: A local spec naming two of the seven providers.
TWO_PROVIDERS_SPEC = SMALL_SPEC + "providers: {{aws: {{}}, gcp: {{}}}}\n"


def test_local_plan_reads_only_the_providers_it_names(world: World):
    spec = world.spec("pair", TWO_PROVIDERS_SPEC)
    up = world.fleet("up", str(spec), "--yes")
    assert up.returncode == 0, up.stderr
    modules = modules_of(world, "plan", str(spec), ok=(0, 3))
    assert {"providers.local", "fleet.state.sqlite", "fleet.planning.planner"} <= modules  # the store was read
    assert (
        imported(modules, *(a for a in ADAPTERS if a not in ("providers.aws", "providers.gcp")), "fleet.state.postgres")
        == []
    )
