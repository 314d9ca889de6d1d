"""Fixtures shared by every test folder: a real PostgreSQL server for the state-store tests.

``postgres_cluster`` (session) starts one throwaway cluster (``tests/pgcluster.py``);
``state_url`` is parametrised over both backends and gives each test a fresh store URL:
an SQLite file, or a new database on that cluster. Without server binaries the PostgreSQL
cases are skipped with the reason, except on CI (``CI=true``), where they fail.

Session-end safety net: every process the tests start inherits ``FLEET_TEST_SESSION`` (a fresh
id per session); at the end, local-cloud node supervisors (``python -m providers.local.nodes``)
carrying this session's id are killed with their process group (each runs in its own session),
so a failed test cannot leave simulated nodes running. Nothing without the id is touched.
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


def pytest_configure(config: pytest.Config) -> None:
    os.environ[SESSION_MARK] = uuid.uuid4().hex


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
        reason = (f"no PostgreSQL server binaries ({', '.join(missing)} not on PATH or under "
                  "/usr/lib/postgresql/*/bin); install Debian's postgresql package")
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
