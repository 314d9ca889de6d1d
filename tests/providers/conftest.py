"""Fixtures the adapter tests share: moto behind the EC2 proxy, the fake ARM server (one per module;
each Azure test module builds its own ``fake`` harness on it, from ``support.azure_adapter``) and a
local cloud's folder."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from azure_arm import ArmServer  # noqa: E402


@pytest.fixture
def aws_moto(monkeypatch, tmp_path):
    """moto behind the EC2 proxy, emptied, with boto3 pointed at it and a fresh offer cache."""
    import aws_world

    world = aws_world.fresh()
    for key, value in {**world.env, "SPOTFLEET_CACHE_DIR": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    return world


@pytest.fixture(scope="module")
def arm_server() -> Iterator[ArmServer]:
    srv = ArmServer(port=0).start()
    yield srv
    srv.stop()


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh local cloud (and fleet home) for this test; the cloud's folder."""
    monkeypatch.setenv("SPOTFLEET_LOCAL_CLOUD", str(tmp_path / "cloud"))
    monkeypatch.setenv("SPOTFLEET_HOME", str(tmp_path / "home"))
    return tmp_path / "cloud"
