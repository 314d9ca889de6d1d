"""State-store faults at the store level: validated row reads, finding and rebuilding damaged
rows, tokens that survive a lost store, private files, and read-only folders named as such."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.executor_world import alive, make_plan
from support.state_records import running_instance

from fleet.errors import FleetError, StateError
from fleet.provisioning.executor import apply, terminate
from fleet.state import DamagedRowError, open_store
from fleet.state import db as state_db
from providers.local import LocalCloud


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """Make ``folder`` read-only for this process: permissions for a normal user, a read-only
    bind mount for root (whom permissions do not stop); skipped where neither is possible."""
    if os.geteuid() != 0:
        modes = {p: stat.S_IMODE(p.stat().st_mode) for p in [folder, *folder.iterdir()]}
        for p in modes:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    bind = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
    if bind.returncode != 0:
        pytest.skip("root without mount rights: cannot make a folder read-only")
    try:
        if subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)  # lazy: a failed open may hold a file


@pytest.fixture
def path(tmp_path: Path) -> Path:
    store = open_store(str(tmp_path / "state.db"))
    store.save_fleet("demo", status="up", spec_json='{"name": "demo"}', spec_hash="h", backend="local")
    store.record_instances("demo", [running_instance("i-1"), running_instance("i-2")])
    store.record_event("demo", "launched", instance_id="i-1", detail={"token": "t"})
    store.close()
    return tmp_path / "state.db"


def poke(path: Path, sql: str, *args: object) -> None:
    with sqlite3.connect(path) as conn:
        assert conn.execute(sql, args).rowcount >= 1


@pytest.mark.parametrize(
    "sql, read, table",
    [
        ("UPDATE instances SET gpus = 'eight' WHERE id = 'i-2'", lambda s: s.instances("demo"), "instances"),
        ("UPDATE instances SET ended_at = x'00ff' WHERE id = 'i-1'", lambda s: s.instances("demo"), "instances"),
        ("UPDATE events SET detail = '{' ", lambda s: s.events("demo"), "events"),
        ("UPDATE events SET detail = '[1]' ", lambda s: s.events("demo"), "events"),
        ("UPDATE fleets SET spec_json = 'not json'", lambda s: s.get_fleet("demo"), "fleets"),
        ("UPDATE fleets SET updated_at = 'later'", lambda s: s.list_fleets(), "fleets"),
        (
            "INSERT INTO plans VALUES ('demo', 'p1', '{\"fleet\": 1}', 1.0, 2.0)",
            lambda s: s.latest_plan("demo"),
            "plans",
        ),
        ("INSERT INTO blocked_pools VALUES ('aws', 'soon', 'r', 1.0)", lambda s: s.blocks(), "blocked_pools"),
    ],
)
def test_a_garbage_row_is_a_damaged_row_error_and_repair_drops_only_it(path, sql, read, table):
    poke(path, sql)
    store = open_store(str(path), create=False)
    with pytest.raises(DamagedRowError) as info:
        read(store)
    assert f"{table} row" in str(info.value) and "fleet repair" in str(info.value)
    store.verify()  # the file itself is fine: repair must not move it aside
    (damage,) = store.damage()
    assert damage.table == table
    store.rebuild_rows([damage])
    assert store.damage() == []
    read(store)
    assert store.get_fleet("demo").name == "demo"
    if table != "instances":
        assert {r.id for r in store.instances("demo")} == {"i-1", "i-2"}


def test_a_damaged_lock_row_is_taken_over(path):
    poke(path, "INSERT INTO locks VALUES ('demo', 'x', 'pid', 'h', 'up', 'a', 'b')")
    store = open_store(str(path), create=False)
    assert store.lock_holder("demo") is None
    with store.lock("demo", "down") as held:
        assert held.command == "down"


def test_tokens_never_repeat_after_the_store_is_lost(cloud, providers, pools, tmp_path):  # noqa: F811
    plan = make_plan(pools[:2], [2, 1])
    first_store = open_store(str(tmp_path / "one.db"))
    first = apply(plan, providers, first_store)
    for provider in {i.pool.provider for i in first.launched}:
        terminate(
            "demo",
            providers[provider],
            [i for i in first.launched if i.pool.provider == provider],
            first_store,
            reason="down",
        )
    second_store = open_store(str(tmp_path / "two.db"))  # the record is gone: sequence numbers restart
    second = apply(plan, providers, second_store)
    assert second.ok and len(second.launched) == 3 and alive(cloud) == plan.counts()
    assert not {launch.token for launch in first_store.launches("demo")} & {
        launch.token for launch in second_store.launches("demo")
    }


def test_the_store_and_a_folder_it_creates_are_private(tmp_path):
    folder = tmp_path / "fresh" / "state"
    store = open_store(str(folder / "state.db"))
    store.save_fleet("demo", status="up")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for f in folder.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    store.close()
    (folder / "state.db").chmod(0o644)
    open_store(str(folder / "state.db"), create=False).close()
    assert stat.S_IMODE((folder / "state.db").stat().st_mode) == 0o600


def test_a_read_only_state_folder_is_named_as_such(path):
    with read_only(path.parent):
        with pytest.raises(StateError) as info:
            store = open_store(str(path), create=False)
            store.save_fleet("demo", status="down")
    message = str(info.value)
    assert "cannot be written" in message and "writable" in message
    assert "attempt to write" not in message and "unable to open" not in message


def test_the_read_only_message_for_a_real_sqlite_readonly_error(path):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with pytest.raises(StateError) as info, state_db.translated(path):
        conn.execute("DELETE FROM fleets")
    assert "cannot be written" in str(info.value) and "readonly database" not in str(info.value)


def test_a_read_only_local_cloud_is_not_called_unreadable_and_reset_is_never_suggested(tmp_path):
    root = tmp_path / "cloud"
    LocalCloud.open(root, time_scale=0)
    with read_only(root):
        with pytest.raises(FleetError) as info:
            LocalCloud.open(root, time_scale=0)
    assert "cannot be written" in str(info.value) and "reset" not in str(info.value)
    assert "unreadable" not in str(info.value)


def test_a_corrupt_local_cloud_says_reset_deletes_every_instance(tmp_path):
    root = tmp_path / "cloud"
    root.mkdir()
    (root / "cloud.db").write_bytes(b"not a database" * 100)
    with pytest.raises(FleetError) as info:
        LocalCloud.open(root)
    assert "fleet local reset" in str(info.value) and "DELETES every simulated instance" in str(info.value)


# ---- links never carry a mode change outside the state folder ---------------------------


def _victim(tmp_path: Path, name: str = "passwd") -> Path:
    victim = tmp_path / "elsewhere" / name
    victim.parent.mkdir(exist_ok=True)
    victim.write_text("root:x:0:0::/root:/bin/sh\n")
    victim.chmod(0o644)
    return victim


@pytest.mark.parametrize("linked", ["state.db", "state.db-wal"])
def test_a_symlinked_store_file_is_refused_and_its_target_keeps_its_mode(tmp_path, linked):
    folder = tmp_path / "state"
    open_store(str(folder / "state.db")).close()
    victim = _victim(tmp_path)
    if linked == "state.db":
        (folder / "state.db").unlink()
    (folder / linked).symlink_to(victim)
    with pytest.raises(StateError, match="symbolic link"):
        open_store(str(folder / "state.db"), create=False)
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert victim.read_text().startswith("root:x:0:0")


def test_private_helpers_never_change_a_mode_through_a_link(tmp_path):
    from fleet.private import private_dir, private_file, write_private

    victim = _victim(tmp_path)
    folder = tmp_path / "elsewhere"
    folder.chmod(0o755)
    (tmp_path / "home-link").symlink_to(folder)
    (tmp_path / "file-link").symlink_to(victim)
    hard = tmp_path / "hard"
    os.link(victim, hard)  # the same inode under a second name
    private_dir(tmp_path / "home-link")
    private_file(tmp_path / "file-link")
    private_file(hard)
    with pytest.raises(OSError):
        write_private(tmp_path / "file-link", "clobbered")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644 and victim.read_text().startswith("root:x")


def test_a_first_command_makes_the_home_and_the_local_cloud_private(tmp_path):
    home = tmp_path / "new" / ".spotfleet"
    LocalCloud.open(home / "localcloud", time_scale=0)
    for folder in (tmp_path / "new", home, home / "localcloud"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for f in (home / "localcloud").glob("cloud.db*"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
