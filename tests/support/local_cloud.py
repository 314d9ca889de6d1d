"""``fleet`` in this process (click's runner) for the local-cloud tests; the cloud's folder is the
``root`` fixture (tests/providers/conftest.py)."""

from __future__ import annotations

from click.testing import CliRunner, Result

from fleet.cli.main import cli


def fleet(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)
