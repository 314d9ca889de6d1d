"""Fixtures for the CLI tests: a fresh world (home, frozen local cloud) per test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cli.world import World  # noqa: E402


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)
