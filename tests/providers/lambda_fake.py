"""The fake Lambda server for the adapter's tests: one per module, reset before each test."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from lambda_server import API_KEY, LambdaServer  # noqa: E402

__all__ = ["API_KEY", "LambdaServer", "control", "fake", "server"]


@pytest.fixture(scope="module")
def server():
    srv = LambdaServer(port=0).start()
    yield srv
    srv.stop()


def control(server: LambdaServer, path: str, body: dict | None = None) -> dict:
    url = f"{server.url}/_control/{path}"
    resp = httpx.post(url, json=body) if body is not None else httpx.get(url)
    resp.raise_for_status()
    return resp.json()


@pytest.fixture
def fake(server: LambdaServer) -> LambdaServer:
    control(server, "reset", {})
    control(server, "config", {"latency": 0, "boot_seconds": 0, "terminate_seconds": 0, "launch_interval": 0,
                               "retry_after": None, "quota": 50})
    return server
