"""Fixtures of the Pulumi stack tests. Tests that need the Pulumi SDK skip without the
``pulumi`` extra (pip install -e '.[pulumi]'); the pure layout tests always run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.stack_specs import MULTI, fleet_plan  # noqa: E402


@pytest.fixture(scope="module")
def multi(tmp_path_factory) -> tuple[Path, Path]:
    return fleet_plan(tmp_path_factory.mktemp("multi"), MULTI)


def pytest_configure(config):
    # the provider SDKs warn about their own deprecated resources when imported; not ours to fix
    config.addinivalue_line("filterwarnings", "ignore:.*has been deprecated in favor of:DeprecationWarning")
