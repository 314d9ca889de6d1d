"""What ``tests/cli/test_provider_lifecycle.py`` needs of a provider's CLI world: the spec file and
home ``fleet`` runs with, ``fleet`` / ``fleet_json``, the fleet's ``fleet_name`` and ``size`` (or ``check_planned``),
``ours()`` (what the provider's fake or emulator holds for the fleet), ``foreign_alive()``
(someone else's resource), ``crash_points`` and the ``check_*`` hooks where a provider's own
assertions go. ``ApiWorld`` (HTTP fakes) and the AWS world implement it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

FLEET_BIN = str(Path(sys.executable).with_name("fleet"))


class LifecycleWorld:
    #: The spec written for the fleet, and the ``SPOTFLEET_HOME`` (state store) ``fleet`` uses.
    spec: Path
    home: Path
    #: The spec's fleet name and the number of one-GPU nodes it asks for.
    fleet_name: str = ""
    size: int = 0
    #: ``SPOTFLEET_TEST_CRASH_AT`` points the kill -9 mid-up case runs at.
    crash_points: tuple[str, ...] = ()

    def fleet(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        raise NotImplementedError

    def fleet_json(self, *args: str, ok: tuple[int, ...] = (0,)) -> Any:
        raise NotImplementedError

    def ours(self, *, live: bool = True) -> list[dict]:
        """The fleet's resources the fake holds: those alive, or (``live=False``) all ever created."""
        raise NotImplementedError

    def foreign_alive(self) -> bool:
        """Whether the resource that is not the fleet's is still alive."""
        raise NotImplementedError

    def ids(self, items: list[dict]) -> list[str]:
        """The ids ``fleet`` reports for ``items`` of :meth:`ours`."""
        return sorted(str(i["id"]) for i in items)

    def before_up(self) -> None:
        """Set the fake up for the up-rerun-down case."""

    def check_up(self, report: dict, ours: list[dict]) -> None:
        """The provider's own checks on the first ``up`` report and what it made."""

    def check_planned(self, planned: int) -> None:
        """The number of nodes an ``up`` report plans is what the spec asks for."""
        assert planned == self.size

    def check_status(self, status: dict, planned: int) -> None:
        """The provider's checks on ``status --json`` once the fleet of ``planned`` nodes is up."""
        assert status["running"] == planned and status["planned"] == planned

    def check_rerun(self, report: dict, first: dict | None = None) -> None:
        """The provider's checks on a second ``up``: after the ``first`` one, or (None) after a kill -9 mid-up."""

    def check_down(self, down: dict, ours: list[dict], outputs: list[subprocess.CompletedProcess[str]]) -> None:
        """The provider's checks once ``down`` ended ``ours``; ``outputs`` are the commands the case ran."""


def desired_zones(report: dict) -> dict[str, int]:
    """An ``up`` report's desired nodes per zone (the pool name's third part)."""
    out: dict[str, int] = {}
    for pool, n in report["desired"].items():
        zone = pool.split("/")[2]
        out[zone] = out.get(zone, 0) + n
    return out
