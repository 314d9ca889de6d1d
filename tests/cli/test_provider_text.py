"""Provider text is escaped and scrubbed before it is printed or stored (issue 28, part 2).

The fake Vast server's ``hostile`` fault answers with a message that echoes the request's
``Authorization`` header and key, changes the terminal title (OSC), clears the screen (CSI) and
forges a line of spotfleet's own output. Whatever face shows it (``up``'s progress and summary,
``status`` in text and JSON, ``history --json``) and the state store's ``launches`` rows hold it
as one line with the control characters escaped and the key masked.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cli.vast_world import VastWorld
from fakes.vast_server import API_KEY

FORGED = "fake line: fleet is up"


def _clean(text: str) -> None:
    assert API_KEY not in text
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert f"\n{FORGED}" not in text  # never a line of its own


@pytest.fixture
def world(tmp_path: Path, vast_server) -> VastWorld:
    return VastWorld(tmp_path, vast_server)


def test_a_hostile_error_is_one_masked_line_in_every_face_and_in_the_store(world: VastWorld):
    world.control("faults", {"target": "create", "kind": "hostile", "count": 1000})
    up = world.fleet("up", str(world.spec), "--yes")
    assert up.returncode == 3, up.stdout + up.stderr  # short: every create was refused
    assert FORGED in up.stdout + up.stderr and "\\x1b]0;pwned" in up.stdout + up.stderr  # shown, escaped
    outputs = [
        up,
        world.fleet("up", str(world.spec), "--yes", "--json"),
        world.fleet("history", "vf", "--json"),
        world.fleet("history", "vf"),
    ]
    world.control("faults", {"target": "list", "kind": "hostile", "count": 2})
    outputs += [world.fleet("status", "vf"), world.fleet("status", "vf", "--json")]
    status = outputs[-2].stdout + outputs[-2].stderr
    # the kit's client masks the whole header value it sent ("Bearer <key>"), and the bare key too
    assert "vast could not be read" in status and "Authorization: ***" in status and API_KEY not in status
    for proc in outputs:
        _clean(proc.stdout + proc.stderr)
    db = sqlite3.connect(world.home / "state.db")
    try:
        messages = [m for (m,) in db.execute("SELECT error_message FROM launches WHERE error_message != ''")]
    finally:
        db.close()
    assert messages and all(FORGED in m for m in messages)
    for message in messages:
        _clean(message)
        assert "\n" not in message and "***" in message
    world.control("reset", {"asks": []})
    assert world.fleet("down", "vf", "--yes").returncode == 0
