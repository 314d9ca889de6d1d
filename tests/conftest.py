"""Fixtures shared by every test folder: a real PostgreSQL server for the state-store tests.

``postgres_cluster`` (session) starts one throwaway cluster (``tests/pgcluster.py``);
``state_url`` is parametrised over both backends and gives each test a fresh store URL:
an SQLite file, or a new database on that cluster. Without server binaries the PostgreSQL
cases are skipped with the reason, except on CI (``CI=true``), where they fail.

Session-end safety net: every process the tests start inherits ``FLEET_TEST_SESSION`` (a fresh
id per session); at the end, local-cloud node supervisors (``python -m providers.local.nodes``)
carrying this session's id are killed with their process group (each runs in its own session),
so a failed test cannot leave simulated nodes running. Nothing without the id is touched.

Markers (``pytest_collection_modifyitems``): ``emulator`` on every test that needs moto,
fake-gcs-server, Azurite or the PostgreSQL server (by the fixture or parameter that starts one, or
by module where a module's tests start one themselves); ``slow`` on the suites that take seconds a
test (node boots, chaos, elastic runs, the browser, Pulumi stacks, per-provider CLI lifecycles, the
end-to-end CLI suites over the local cloud, node agents, the framework glue).
``pytest -m "not slow and not emulator"`` is the quick loop.
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pgcluster  # noqa: E402

SESSION_MARK = "FLEET_TEST_SESSION"

# A test run started as a background job of a non-interactive shell (`nohup ... &`, some CI runners)
# inherits SIGINT ignored, and so would every `fleet` process the tests start: the Ctrl-C tests could
# not interrupt them. The tests run with Python's own SIGINT handling whatever started them (a
# handler, unlike an ignored signal, is reset to the default in the processes they exec).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: Fixtures that start an emulator or a database server.
EMULATOR_FIXTURES = frozenset(
    {
        "postgres_cluster",  # this file: a throwaway PostgreSQL cluster
        "location_factory",  # tests/checkpoint: stores on moto S3, fake-gcs-server, Azurite
        "aws_cli",  # tests/cli: moto behind the EC2 fault proxy
        "gcs",  # tests/cli/conftest.py: fake-gcs-server
        "moto",
        "moto_url",  # tests/agent/test_run_guards.py, tests/providers/test_aws_node_credentials.py
        "azurite",  # tests/checkpoint/test_azure_token.py, tests/providers/test_azure_node_credentials.py
        "aws_moto",  # tests/providers: moto behind the EC2 proxy
    }
)
#: Parametrised fixtures -> the parameters of theirs that start one.
EMULATOR_PARAMS = {
    "state_url": ("postgresql",),
    "location": ("s3", "gs", "az"),
    "harness": ("aws", "gcp", "azure"),  # tests/contract: moto, fake-gcs-server, Azurite (prefixes)
    "cli_world": ("aws", "gcp", "azure"),  # tests/cli/test_provider_lifecycle.py: the same emulators
}
#: Modules (or single tests) whose tests start an emulator themselves.
EMULATOR_PATHS = (
    "tests/cli/test_aws_check.py",
    "tests/cli/test_examples_up.py",
    "tests/providers/test_aws_offers.py",
    "tests/node_boot/",
    "tests/unit/test_shipping.py::test_an_s3_url",
    "tests/cli/test_node_credentials_cli.py::test_vast_nodes_get_the_fleets_scoped_key",
)
#: Suites whose tests take seconds each (measured with --durations on 2 loaded cores).
SLOW_PATHS = (
    "tests/node_boot/",
    "tests/chaos/",
    "tests/agent/test_elastic_run.py",
    "tests/stacks/test_azure_stack.py",
    "tests/stacks/test_ownership.py",
    "tests/stacks/test_spot_fleet.py",
    "tests/stacks/test_vast_dynamic.py",
    "tests/stacks/test_export.py",
    # per-provider CLI lifecycles: `fleet` subprocesses against a provider's fake, several runs a test
    "tests/cli/test_aws_cli.py",
    "tests/cli/test_aws_templates_cli.py",
    "tests/cli/test_logs_aws.py",
    "tests/cli/test_azure_cli.py",
    "tests/cli/test_azure_ops_cli.py",
    "tests/cli/test_azure_first_contact_cli.py",
    "tests/cli/test_azure_scaleset_cli.py",
    "tests/cli/test_gcp_lifecycle.py",
    "tests/cli/test_provider_lifecycle.py",
    "tests/cli/test_lambda_cli.py",
    "tests/cli/test_runpod_cli.py",
    "tests/cli/test_oci_lifecycle.py",
    "tests/cli/test_vast_cli.py",
    "tests/cli/test_examples_up.py",
    # seconds a test on 2 loaded cores (--durations): `fleet` subprocesses over the local cloud, node
    # agents, the framework glue on torch
    "tests/cli/test_unreadable_provider_cli.py",
    "tests/cli/test_completion_cli.py",
    "tests/cli/test_honest_status.py",
    "tests/cli/test_tables.py",
    "tests/cli/test_logs_cli.py",
    "tests/cli/test_saved_plan_cli.py",
    "tests/cli/test_queue_example.py",
    "tests/cli/test_lifecycle_cli.py",
    "tests/cli/test_learned_rates_cli.py",
    "tests/cli/test_repair_cli.py",
    "tests/cli/test_state_faults_cli.py",
    "tests/cli/test_rebalance_cli.py",
    "tests/cli/test_status_list_cli.py",
    "tests/cli/test_secrets_cli.py",
    "tests/cli/test_rebalance_service.py",
    "tests/cli/test_dashboard_cli.py",
    "tests/cli/test_provider_text.py",
    "tests/cli/test_simulate_cli.py",
    "tests/cli/test_state_unwritable_cli.py",
    "tests/cli/test_status_watch.py",
    "tests/cli/test_billing_cli.py",
    "tests/cli/test_startup_imports.py",
    "tests/agent/test_glue_notice.py",
    "tests/agent/test_run.py",
    "tests/agent/test_adopt.py",
    "tests/agent/test_local_cloud_node.py",
    "tests/checkpoint/integrations/",
)


def pytest_configure(config: pytest.Config) -> None:
    os.environ[SESSION_MARK] = uuid.uuid4().hex


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    for item in items:
        where = f"{item.path.relative_to(root).as_posix()}::{item.name}" if item.path.is_relative_to(root) else ""
        if _needs_emulator(item, where):
            item.add_marker(pytest.mark.emulator)
        if where.startswith(SLOW_PATHS):
            item.add_marker(pytest.mark.slow)


def _needs_emulator(item: pytest.Item, where: str) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    if names & EMULATOR_FIXTURES or where.startswith(EMULATOR_PATHS):
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    return any(str(params.get(name, "")).startswith(starts) for name, starts in EMULATOR_PARAMS.items())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    mark = f"{SESSION_MARK}={os.environ.get(SESSION_MARK, '')}".encode()
    for pid in _local_nodes_marked(mark):
        try:
            os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _local_nodes_marked(mark: bytes) -> list[int]:
    """Pids of local-cloud node supervisors whose environment holds ``mark`` (this session's id)."""
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if mark in environ and b"providers.local.nodes" in cmdline:
            found.append(int(entry.name))
    return found


def _on_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[pgcluster.Cluster]:
    missing = pgcluster.missing_binaries()
    if missing:
        reason = (
            f"no PostgreSQL server binaries ({', '.join(missing)} not on PATH or under "
            "/usr/lib/postgresql/*/bin); install Debian's postgresql package"
        )
        if _on_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        message = "psycopg is not installed: pip install -e '.[test]'"
        pytest.fail(message) if _on_ci() else pytest.skip(message)
    cluster = pgcluster.Cluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS)
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, not yet created store URL on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "state.db")
    return request.getfixturevalue("postgres_cluster").new_database()
