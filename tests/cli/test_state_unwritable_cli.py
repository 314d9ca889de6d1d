"""A state store that cannot be written (a read-only mount, a full disk) never keeps a fleet up:
`down` terminates by tags and exits 0 when nothing is left, `status` shows what it can read, and
the advice the error gives works when followed.

The failures are the real ones a user hits: each command runs in its own mount namespace
(``unshare --mount``) where the state folder is a read-only bind mount or a full tmpfs; the
local cloud lives outside it. Skipped where mount namespaces are not allowed."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from cli.world import FLEET_BIN, World
from cli.world import SMALL_SPEC as SMALL


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--mount", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True
    )
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _namespaces_work(), reason="needs mount namespaces (unshare --mount)")


def _world(tmp_path: Path) -> tuple[World, dict[str, str], Path]:
    world = World(tmp_path)
    folder = tmp_path / "state"
    env = world.env(SPOTFLEET_STATE=str(folder / "state.db"), HOME=str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    return world, env, folder


def _up(world: World, env: dict[str, str], name: str) -> dict:
    proc = world.fleet("up", str(world.spec(name, SMALL)), "--yes", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and len(report["launched"]) == 2
    return report


def _fleet(*args: str) -> str:
    return " ".join(shlex.quote(a) for a in (FLEET_BIN, *args))


def _in_namespace(mount: str, script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``script`` after ``mount`` in a private mount namespace (the mount ends with it)."""
    return subprocess.run(
        ["unshare", "--mount", "sh", "-c", f"{mount} && {script}"], env=env, capture_output=True, text=True, timeout=300
    )


def _read_only(folder: Path) -> str:
    return f"mount --bind -o ro {shlex.quote(str(folder))} {shlex.quote(str(folder))}"


def _full(folder: Path) -> str:
    """A 256 KiB tmpfs over ``folder`` holding a copy of the store, then filled to the last byte."""
    q = shlex.quote(str(folder))
    return (
        f"cp -p {q}/state.db {q}/../copy.db && mount -t tmpfs -o size=256k tmpfs {q} && "
        f"cp -p {q}/../copy.db {q}/state.db && {{ dd if=/dev/zero of={q}/fill bs=4k 2>/dev/null; true; }}"
    )


@pytest.mark.parametrize("fault, phrase", [("read-only", "mounted read-only"), ("full", "is full")])
def test_down_terminates_by_tags_and_status_reads_when_the_store_cannot_be_written(tmp_path, fault, phrase):
    world, env, folder = _world(tmp_path)
    _up(world, env, "stuck")
    mount = _read_only(folder) if fault == "read-only" else _full(folder)
    status = _in_namespace(mount, _fleet("status", "stuck"), env)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    assert "2 of 2 planned instances running" in status.stdout
    assert "cannot be written" in status.stderr and phrase in " ".join(status.stderr.split())
    for reads in (("history", "stuck"), ("list",)):
        read = _in_namespace(mount, _fleet(*reads), env)
        assert read.returncode == 0 and "stuck" in read.stdout, read.stderr
    down = _in_namespace(mount, _fleet("down", "stuck", "--yes"), env)
    assert down.returncode == 0 and "Traceback" not in down.stderr, down.stderr
    flat = " ".join(down.stderr.split())
    assert "cannot be written" in flat and phrase in flat and "fleet repair stuck" in flat
    assert "terminated 2 instance(s)" in down.stdout
    assert world.alive("stuck") == {}


def test_the_read_only_advice_works_when_followed(tmp_path):
    world, env, folder = _world(tmp_path)
    first = _up(world, env, "moved")
    spec = str(world.spec("moved", SMALL))
    refused = _in_namespace(_read_only(folder), _fleet("up", spec, "--yes"), env)
    assert refused.returncode == 1, refused.stderr
    flat = " ".join(refused.stderr.split())
    assert "mounted read-only" in flat and "chmod" not in flat
    (advice,) = re.findall(r"`(mkdir -p [^`]+)`", flat)
    followed = _in_namespace(_read_only(folder), f"{advice} && {_fleet('up', spec, '--yes', '--json')}", env)
    assert followed.returncode == 0, followed.stderr
    assert '"launched": []' in followed.stdout  # the copy knows the fleet: nothing new launched
    copy = tmp_path / "user" / "spotfleet-state" / "state.db"
    assert copy.exists()
    down = world.fleet("down", "moved", "--yes", "--json", env={**env, "SPOTFLEET_STATE": str(copy)})
    assert down.returncode == 0 and sorted(json.loads(down.stdout)["terminated"]) == sorted(first["launched"])
