"""One home folder for every layer: ``$SPOTFLEET_HOME`` or ``~/.spotfleet``, and ``--home`` sets it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fleet.home import spotfleet_home


def test_home_comes_from_the_variable_or_the_users_folder(tmp_path: Path):
    assert spotfleet_home({"SPOTFLEET_HOME": str(tmp_path)}) == tmp_path
    assert spotfleet_home({}) == Path.home() / ".spotfleet"


def test_the_home_option_is_the_home_of_everything_the_command_does(tmp_path: Path):
    """Adapters and caches read ``$SPOTFLEET_HOME``: ``fleet --home`` must set it for them."""
    probe = (
        "import os, sys; from fleet.cli.main import cli; from fleet.home import spotfleet_home\n"
        "import click\n"
        "@cli.command('probe-home')\n"
        "def probe():\n"
        "    click.echo(spotfleet_home())\n"
        "cli(['--home', sys.argv[1], 'probe-home'], standalone_mode=True)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SPOTFLEET_HOME"}
    out = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "h")], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path / "h")
