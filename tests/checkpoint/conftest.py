"""Fixtures for the checkpoint tests: one emulator per kind per session, a fresh location per test.

``location`` is parametrised over the four stores (local directory, moto S3, fake-gcs-server,
Azurite). A missing emulator skips its tests locally and fails them under ``CI=true``.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

import storage_emulators as emu  # noqa: E402

from fleet.checkpoint import CheckpointManager, TransferSettings, open_store  # noqa: E402
from fleet.checkpoint.stores.base import MiB, ObjectStore  # noqa: E402

STORES = ["file", "s3", "gs", "az"]
# small parts so modest test payloads still take the multipart / composite / block-list paths
SMALL_PARTS = TransferSettings(part_size=5 * MiB, concurrency=4)


@dataclass
class Location:
    """A fresh, empty checkpoint location and the environment that reaches it."""

    kind: str
    uri: str
    env: dict[str, str] = field(default_factory=dict)

    def store(self, transfer: TransferSettings = SMALL_PARTS) -> ObjectStore:
        return open_store(self.uri, env=self.env, transfer=transfer)

    def manager(self, **kwargs: object) -> CheckpointManager:
        kwargs.setdefault("transfer", SMALL_PARTS)
        return CheckpointManager(self.uri, env=self.env, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def emulators() -> Iterator[Callable[[str], emu.Emulator]]:
    running: dict[str, emu.Emulator] = {}
    missing: dict[str, str] = {}

    def get(scheme: str) -> emu.Emulator:
        if scheme in missing:
            pytest.skip(missing[scheme])
        if scheme not in running:
            try:
                running[scheme] = emu.STARTERS[scheme]()
            except emu.EmulatorUnavailable as err:
                if emu.in_ci():
                    pytest.fail(f"{err} (emulators are required when CI=true)")
                missing[scheme] = str(err)
                pytest.skip(str(err))
        return running[scheme]

    yield get
    for em in running.values():
        em.stop()


def make_location(kind: str, emulators: Callable[[str], emu.Emulator], tmp_path: Path, name: str) -> Location:
    if kind == "file":
        return Location(kind, f"file://{tmp_path}/checkpoints")
    em = emulators(kind)
    prefix = f"{name[:40]}-{uuid.uuid4().hex[:8]}".replace("[", "-").replace("]", "")
    return Location(kind, em.bucket_uri("ckpt-tests", prefix), dict(em.env))


@pytest.fixture(params=STORES)
def location(request: pytest.FixtureRequest, emulators: Callable[[str], emu.Emulator], tmp_path: Path) -> Location:
    return make_location(request.param, emulators, tmp_path, request.node.name)


@pytest.fixture
def location_factory(
    emulators: Callable[[str], emu.Emulator], tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[[str], Location]:
    return lambda kind: make_location(kind, emulators, tmp_path / uuid.uuid4().hex[:6], request.node.name)
