"""Fixtures for the CLI tests: a fresh world (home, frozen local cloud) per test, and the fake
provider servers more than one module drives (one per module): ARM, Vast, Compute Engine, Lambda,
RunPod, OCI, fake-gcs-server; and the AWS world (moto behind the EC2 fault proxy) with its zone prices, fresh per test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cli.world import World  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from azure_arm import ArmServer  # noqa: E402
from fakes.gce_server import GceServer  # noqa: E402
from fakes.oci_server import OciServer  # noqa: E402
from fakes.storage_emulators import EmulatorUnavailable, in_ci, start_fake_gcs  # noqa: E402
from lambda_server import LambdaServer  # noqa: E402
from runpod_server import RunPodServer  # noqa: E402
from vast_server import VastServer  # noqa: E402

if TYPE_CHECKING:
    from cli.aws_cli_world import AwsCli


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


@pytest.fixture(scope="module")
def arm_server() -> Iterator[ArmServer]:
    srv = ArmServer(port=0).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def vast_server() -> Iterator[VastServer]:
    srv = VastServer(port=0).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def lambda_server() -> Iterator[LambdaServer]:
    srv = LambdaServer(port=0).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def runpod_server() -> Iterator[RunPodServer]:
    srv = RunPodServer(port=0).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def oci_server() -> Iterator[OciServer]:
    srv = OciServer().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def gce() -> Iterator[GceServer]:
    srv = GceServer().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def gcs():
    """fake-gcs-server; skipped where it cannot start, except in CI."""
    try:
        emulator = start_fake_gcs()
    except EmulatorUnavailable as err:
        if in_ci():
            raise
        pytest.skip(str(err))
    yield emulator
    emulator.stop()


@pytest.fixture
def aws_cli(tmp_path: Path) -> AwsCli:
    from cli.aws_cli_world import PRICES, AwsCli, aws_world  # boto3 and moto: only where a test asks

    world = aws_world.fresh()
    world.proxy.prices(PRICES, default=5.0)
    return AwsCli(tmp_path, world)
