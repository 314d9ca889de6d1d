"""Fixtures shared by the provider tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))


@pytest.fixture
def aws_moto(monkeypatch, tmp_path):
    """moto behind the EC2 proxy, emptied, with boto3 pointed at it and a fresh offer cache."""
    import aws_world

    world = aws_world.fresh()
    for key, value in {**world.env, "SPOTFLEET_CACHE_DIR": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    return world
