"""The fake Lambda server for the Lambda adapter's tests: one per module (``server``), reset
before each test (``fake``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fakes"))
from lambda_server import LambdaServer  # noqa: E402
from support.fake_control import control  # noqa: E402


@pytest.fixture(scope="module")
def server() -> Iterator[LambdaServer]:
    srv = LambdaServer(port=0).start()
    yield srv
    srv.stop()


@pytest.fixture
def fake(server: LambdaServer) -> LambdaServer:
    control(server, "reset", {})
    control(
        server,
        "config",
        {
            "latency": 0,
            "boot_seconds": 0,
            "terminate_seconds": 0,
            "launch_interval": 0,
            "retry_after": None,
            "quota": 50,
        },
    )
    return server
