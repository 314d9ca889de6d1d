"""Fixtures shared by every test folder: a real PostgreSQL server for the state-store tests.

``postgres_cluster`` (session) starts one throwaway cluster (``tests/pgcluster.py``);
``state_url`` is parametrised over both backends and gives each test a fresh store URL:
an SQLite file, or a new database on that cluster. Without server binaries the PostgreSQL
cases are skipped with the reason, except on CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pgcluster  # noqa: E402


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
