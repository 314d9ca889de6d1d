"""The README states, near its top where a user looks, what running and testing need: the Python
version that pyproject.toml requires, Node.js/npm for the test command, the `metrics` extra; and its
two top commands stay the install-and-run and the install-and-test lines."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
TOP = "\n".join(README.splitlines()[:30])


def test_the_python_requirement_is_the_one_pyproject_declares():
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    version = re.fullmatch(r">=\s*(3\.\d+)", required)
    assert version, f"requires-python {required!r}: update this test and the README together"
    assert f"Python {version.group(1)} or newer" in TOP and f'`requires-python = "{required}"`' in TOP


def test_node_npm_and_the_metrics_extra_are_stated_at_the_top():
    assert "Node.js and npm" in TOP
    assert "pip install -e '.[metrics]'" in TOP  # from the checkout: spotfleet is on no index
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "metrics" in extras


def test_the_two_top_commands_are_intact():
    block = README.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert "pip install -e ." in commands[0] and "fleet up examples/quickstart.yaml" in commands[0]
    assert "pip install -e '.[test]'" in commands[1] and "npm install" in commands[1]
    assert commands[1].endswith("python -m pytest")
