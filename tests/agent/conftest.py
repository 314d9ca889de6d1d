"""Fixtures for the node-agent tests: the fake metadata servers, started once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_support import kill_leftovers  # noqa: E402
from fakes.metadata import FakeAzure, FakeGce, FakeImds, FakeOciImds, FakeVast  # noqa: E402


@pytest.fixture(autouse=True)
def _no_leftover_processes():
    yield
    kill_leftovers()


def _session_fake(cls):
    @pytest.fixture(scope="session")
    def started():
        fake = cls().start()
        yield fake
        fake.stop()

    return started


imds_server = _session_fake(FakeImds)
gce_server = _session_fake(FakeGce)
azure_server = _session_fake(FakeAzure)
vast_server = _session_fake(FakeVast)
oci_imds_server = _session_fake(FakeOciImds)


@pytest.fixture
def imds(imds_server):
    imds_server.reset()
    return imds_server


@pytest.fixture
def gce(gce_server):
    gce_server.reset()
    return gce_server


@pytest.fixture
def azure(azure_server):
    azure_server.reset()
    return azure_server


@pytest.fixture
def vast(vast_server):
    vast_server.reset()
    return vast_server


@pytest.fixture
def oci_imds(oci_imds_server):
    oci_imds_server.reset()
    return oci_imds_server
