"""The SQLite state store: records, migrations, error messages and the per-fleet lock."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from support.state_records import POOL, running_instance

from fleet.errors import FleetLockedError, FleetNotFoundError, StateError
from fleet.model import BilledRate
from fleet.state import EventKind, LaunchStatus, open_store
from fleet.state import db as state_db


@pytest.fixture
def store(state_url: str):
    s = open_store(state_url)
    yield s
    s.close()


def test_fleet_records_keep_spec_when_status_changes(store):
    store.save_fleet("demo", status="planned", spec_json='{"name": "demo"}', spec_hash="abc", backend="local")
    store.save_fleet("demo", status="up")
    rec = store.get_fleet("demo")
    assert (rec.status, rec.spec_hash, rec.backend) == ("up", "abc", "local")
    assert rec.to_dict()["spec"] == {"name": "demo"}
    assert [f.name for f in store.list_fleets()] == ["demo"]


def test_unknown_fleet_names_the_known_ones(store):
    store.save_fleet("alpha", status="up")
    with pytest.raises(FleetNotFoundError, match=r"no fleet named 'beta'.*known fleets: alpha.*fleet up"):
        store.get_fleet("beta")
    with pytest.raises(FleetNotFoundError):
        store.set_status("beta", "down")
    assert store.find_fleet("beta") is None


def test_launch_sequence_numbers_and_tokens_are_recorded_before_the_call(store):
    first = store.begin_launch("demo", "plan1", POOL.id, 4, lambda seq: f"tok-{seq}")
    second = store.begin_launch("demo", "plan1", POOL.id, 2, lambda seq: f"tok-{seq}")
    other = store.begin_launch("demo", "plan2", POOL.id, 2, lambda seq: f"other-{seq}")
    assert (first.seq, second.seq, other.seq) == (1, 2, 1)
    assert [launch.token for launch in store.launches("demo", status=LaunchStatus.REQUESTED)] == [
        "tok-1",
        "tok-2",
        "other-1",
    ]
    store.finish_launch(first.id, status=LaunchStatus.DONE, launched=3, error_kind="capacity", error_message="x")
    done = store.launches("demo", status=LaunchStatus.DONE)
    assert [(launch.launched, launch.error_kind, launch.finished_at is not None) for launch in done] == [
        (3, "capacity", True)
    ]


def test_instances_are_recorded_once_and_ended_once(store):
    assert (
        store.record_instances(
            "demo",
            [running_instance("i-1", plan="p9"), running_instance("i-2")],
            on_demand_prices={POOL.id: 98.0},
            plan_id="p1",
        )
        == 2
    )
    assert store.record_instances("demo", [running_instance("i-1"), running_instance("i-3")]) == 1
    store.end_instances("demo", {"i-1": (2000.0, EventKind.PREEMPTED)})
    store.end_instances("demo", {"i-1": (3000.0, EventKind.TERMINATED)})
    rows = {r.id: r for r in store.instances("demo")}
    assert rows["i-1"].ended_at == 2000.0 and rows["i-1"].end_reason == "preempted"
    assert rows["i-1"].plan_id == "p9" and rows["i-2"].plan_id == "p1"
    assert rows["i-2"].on_demand_price == 98.0 and rows["i-3"].on_demand_price is None
    assert sorted(r.id for r in store.instances("demo", alive_only=True)) == ["i-2", "i-3"]


def test_billed_rates_are_recorded_beside_the_planned_price_and_replaced_by_a_later_reading(store):
    store.record_instances("demo", [running_instance("i-1"), running_instance("i-2")])
    assert [(r.billed_per_hour, r.billed_source, r.rental) for r in store.instances("demo")] == [(None, "", "")] * 2
    store.record_billed(
        "demo",
        {
            "i-1": BilledRate(per_hour=33.5, source="spot-history", rental="spot"),
            "i-9": BilledRate(per_hour=1.0, source="instance"),
        },
    )  # not recorded: ignored
    store.record_billed("other", {"i-2": BilledRate(per_hour=7.0, source="instance")})  # another fleet's id
    store.record_billed("demo", {"i-1": BilledRate(per_hour=34.0, source="spot-history\x1b[2J", rental="spot")})
    rows = {r.id: r for r in store.instances("demo")}
    assert (rows["i-1"].price_per_hour, rows["i-1"].billed_per_hour, rows["i-1"].rental) == (30.0, 34.0, "spot")
    assert "\x1b" not in rows["i-1"].billed_source  # provider text is stored made safe
    assert rows["i-2"].billed_per_hour is None


def test_a_v1_store_migrates_to_billed_columns_keeping_its_instances(state_url, monkeypatch):
    from fleet.state.migrations import postgres as pg_migrations

    table = pg_migrations.MIGRATIONS if state_url.startswith("postgresql") else state_db.MIGRATIONS
    with monkeypatch.context() as m:  # a store as spotfleet v1 wrote it
        m.delitem(table, 2)
        s = open_store(state_url)
        s._exec(
            "INSERT INTO instances (fleet, id, pool, market, accelerator, gpus, price_per_hour, launched_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ("demo", "i-old", POOL.id, "spot", "H100", 8, 30.0, 1000.0),
        )
        s.close()
    s = open_store(state_url)
    try:
        (old,) = s.instances("demo")
        assert (old.id, old.price_per_hour, old.billed_per_hour, old.billed_source, old.rental) == (
            "i-old",
            30.0,
            None,
            "",
            "",
        )
        s.record_billed("demo", {"i-old": BilledRate(per_hour=31.0, source="spot-history", rental="spot")})
        assert s.instances("demo")[0].billed_per_hour == 31.0
        assert state_db.latest_version() == max(pg_migrations.MIGRATIONS) == 2
    finally:
        s.close()


def test_events_are_ordered_filtered_and_validated(store):
    store.record_event("demo", EventKind.LAUNCHED, instance_id="i-1", pool=POOL.id, detail={"n": 1}, ts=10.0)
    store.record_event("demo", EventKind.NOTICE, instance_id="i-1", ts=5.0)
    store.record_event("other", EventKind.LAUNCHED, ts=1.0)
    assert [e.kind for e in store.events("demo")] == [EventKind.NOTICE, EventKind.LAUNCHED]
    assert [e.detail for e in store.events("demo", kinds={EventKind.LAUNCHED})] == [{"n": 1}]
    with pytest.raises(ValueError, match="event kind"):
        store.record_event("demo", "Bad Kind")


def test_a_sound_store_reports_no_damaged_rows_and_rebuilding_none_keeps_every_row(store):
    # `fleet repair` asks every store for its damaged rows; the PostgreSQL store answers too
    store.record_event("demo", EventKind.LAUNCHED, instance_id="i-1", detail={"n": 1}, ts=10.0)
    assert store.damage() == []
    store.rebuild_rows([])
    assert [e.detail for e in store.events("demo")] == [{"n": 1}]


def test_plans_round_trip_and_applied_flag(store, tmp_path):
    from fleet.model import Allocation, Offer, Plan, PlanTotals

    def plan(count: int) -> Plan:
        offer = Offer(pool=POOL, accelerator="H100", gpus=8, price_per_hour=30.0, on_demand_price=98.0)
        totals = PlanTotals(
            gpus=8 * count,
            weighted_gpus=8.0 * count,
            target_weighted_gpus=16,
            on_demand_weighted_gpus=0,
            price_per_hour=30.0 * count,
            true_cost_per_hour=31.0 * count,
            true_cost_per_weighted_gpu_hour=3.9,
            expected_interruptions_per_day=0.5,
        )
        return Plan(
            fleet="demo",
            spec_hash="h",
            strategy="s",
            totals=totals,
            allocations=(
                Allocation(offer=offer, count=count, weighted_gpus=8.0 * count, true_cost_per_hour=31.0 * count),
            ),
        )

    one, two = plan(1), plan(2)
    store.save_plan(one)
    store.save_plan(two)
    store.save_plan(one)
    assert store.latest_plan("demo").id == two.id
    assert store.latest_plan("demo", applied_only=True) is None
    store.mark_plan_applied("demo", one.id)
    assert store.latest_plan("demo", applied_only=True) == one


def test_blocks_keep_the_longer_deadline(store):
    store.block("aws/us-east-1", until=100.0, reason="quota")
    store.block("aws/us-east-1", until=50.0, reason="quota again")
    store.block(POOL.id, until=10.0, reason="capacity")
    assert [(b.prefix, b.until, b.provider) for b in store.blocks()] == [
        ("aws/us-east-1", 100.0, "aws"),
        (POOL.id, 10.0, "aws"),
    ]
    store.unblock([POOL.id])
    assert [b.prefix for b in store.blocks()] == ["aws/us-east-1"]


def test_concurrent_writers_from_threads(store):
    def work(n: int) -> None:
        for k in range(20):
            store.record_event("demo", EventKind.LAUNCHED, instance_id=f"{n}-{k}")
            store.begin_launch("demo", "p", f"pool-{n}", 1, lambda seq, n=n: f"t-{n}-{seq}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.events("demo")) == 80
    assert sorted({launch.seq for launch in store.launches("demo")}) == list(range(1, 21))


# ---- files: missing, corrupt, foreign, migrations -------------------------------------


def test_missing_store_without_create_points_to_repair(tmp_path):
    with pytest.raises(StateError, match=r"no state store at .*fleet up SPEC.*fleet repair"):
        open_store(str(tmp_path / "nope.db"), create=False)
    assert not (tmp_path / "nope.db").exists()


def test_corrupt_file_is_a_clear_error(tmp_path):
    path = tmp_path / "state.db"
    path.write_bytes(b"this is not sqlite at all\n" * 200)
    with pytest.raises(StateError, match=r"is corrupt .*fleet repair"):
        open_store(str(path))


def test_truncated_store_is_a_clear_error(tmp_path):
    path = tmp_path / "state.db"
    s = open_store(str(path))
    for n in range(300):
        s.record_event("demo", EventKind.LAUNCHED, instance_id=f"i-{n}", detail={"pad": "x" * 200})
    s.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3] + b"\0" * 100)
    with pytest.raises(StateError, match="fleet repair"):
        s = open_store(str(path))
        s.events("demo")


def _execute(path: Path, sql: str) -> None:
    """Change the file behind the store's back, as another program would."""
    conn = sqlite3.connect(path)
    conn.execute(sql)
    conn.commit()
    conn.close()


def test_foreign_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "other.db"
    _execute(path, "CREATE TABLE songs (title TEXT)")
    with pytest.raises(StateError, match="not a spotfleet state store"):
        open_store(str(path))


def test_unsupported_url_scheme(tmp_path):
    with pytest.raises(StateError, match="scheme 'mysql' is not supported"):
        open_store("mysql://db/spotfleet")
    s = open_store(f"sqlite:///{tmp_path}/u.db")
    assert s.list_fleets() == []
    s.close()


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "state.db"
    open_store(str(path)).close()
    _execute(path, "UPDATE schema_version SET version = 99")
    with pytest.raises(StateError, match="schema v99, newer"):
        open_store(str(path))


def test_a_v2_step_migrates_existing_stores_and_keeps_data(tmp_path, monkeypatch):
    path = tmp_path / "state.db"
    s = open_store(str(path))
    s.save_fleet("demo", status="up", spec_json="{}", spec_hash="h")
    s.close()
    nxt = state_db.latest_version() + 1
    monkeypatch.setitem(
        state_db.MIGRATIONS,
        nxt,
        (
            "ALTER TABLE fleets ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
            lambda conn: conn.execute("UPDATE fleets SET owner = 'team-a'"),
        ),
    )
    s = open_store(str(path))
    assert s.get_fleet("demo").status == "up"
    s.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == nxt
    assert conn.execute("SELECT owner FROM fleets").fetchall() == [("team-a",)]
    conn.close()


def test_a_failing_migration_leaves_the_store_at_its_old_version(tmp_path, monkeypatch):
    path = tmp_path / "state.db"
    open_store(str(path)).close()
    old = state_db.latest_version()
    monkeypatch.setitem(state_db.MIGRATIONS, old + 1, ("ALTER TABLE fleets ADD COLUMN x TEXT", "THIS IS NOT SQL"))
    with pytest.raises(StateError):
        open_store(str(path))
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == old
    assert "x" not in [r[1] for r in conn.execute("PRAGMA table_info(fleets)")]
    conn.close()


# ---- the per-fleet lock against real processes -----------------------------------------

HOLDER = textwrap.dedent("""
    import sys, time
    from fleet.state import open_store
    s = open_store(sys.argv[1])
    s.acquire_lock("demo", "up", ttl=float(sys.argv[2]))
    print("locked", flush=True)
    time.sleep(60)
""")


def _holder(url: str, ttl: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, url, str(ttl)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_lock_held_by_a_live_process_names_it_and_a_dead_holder_is_taken_over(tmp_path, store):
    proc = _holder(store.url, ttl=600)
    try:
        with pytest.raises(FleetLockedError, match=rf"fleet 'demo' is busy: `fleet up` \(pid {proc.pid} on "):
            with store.lock("demo", "down"):
                pass
    finally:
        proc.kill()
        proc.wait()
    with store.lock("demo", "down") as info:
        assert store.lock_holder("demo").owner == info.owner
    assert store.lock_holder("demo") is None


def test_expired_lock_of_a_live_process_is_taken_over(tmp_path, store):
    proc = _holder(store.url, ttl=0.05)
    try:
        time.sleep(0.1)
        with store.lock("demo", "status") as info:
            assert info.command == "status"
    finally:
        proc.kill()
        proc.wait()


def test_lock_is_per_fleet_and_reentrant_for_its_owner(tmp_path, store):
    proc = _holder(store.url, ttl=600)
    try:
        with store.lock("other", "up"):
            with store.lock("other", "up"):
                pass
    finally:
        proc.kill()
        proc.wait()


def _can_unshare_pid() -> bool:
    return (
        subprocess.run(
            ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "true"], capture_output=True
        ).returncode
        == 0
    )


@pytest.mark.skipif(not _can_unshare_pid(), reason="needs PID namespaces (unshare --pid)")
def test_a_holder_in_another_pid_namespace_keeps_its_lock(store):
    """A rebalancer in a container (own PID namespace, same hostname, shared state) is alive
    though this namespace's /proc has no such process (or another one under its pid)."""
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable, "-c", HOLDER, store.url, "600"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        held = store.lock_holder("demo")
        assert held is not None and held.pid == 1  # pid 1 in its namespace: our init here
        with pytest.raises(FleetLockedError, match=r"fleet 'demo' is busy: `fleet up` \(pid 1 on "):
            with store.lock("demo", "rebalance"):
                pass
        assert store.lock_holder("demo").owner == held.owner
    finally:
        proc.kill()
        proc.wait()


HEARTBEAT_HOLDER = textwrap.dedent("""
    import sys, time
    from fleet.state import open_store
    s = open_store(sys.argv[1])
    with s.lock("demo", "rebalance", ttl=float(sys.argv[2])):
        print("locked", flush=True)
        time.sleep(60)
""")


def test_a_holder_renews_its_lease_with_a_heartbeat(store):
    proc = subprocess.Popen([sys.executable, "-c", HEARTBEAT_HOLDER, store.url, "2"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        first = store.lock_holder("demo")
        deadline = time.monotonic() + 60
        while store.lock_holder("demo").expires_at <= first.expires_at:
            assert time.monotonic() < deadline, "the holder never renewed its lease"
            time.sleep(0.05)
        assert store.lock_holder("demo").owner == first.owner
    finally:
        proc.kill()
        proc.wait()
    with store.lock("demo", "down") as info:  # a dead holder in this namespace: taken at once
        assert info.command == "down"


def test_a_lock_taken_over_after_expiry_stops_its_old_holder(tmp_path, store):
    store.acquire_lock("demo", "up", ttl=0.05)
    time.sleep(0.1)
    proc = _holder(store.url, ttl=600)  # takes the expired lock over
    try:
        with pytest.raises(FleetLockedError, match=rf"lock expired and `fleet up` \(pid {proc.pid} on "):
            store.refresh_lock("demo")
        store.release_lock("demo")  # releasing never frees someone else's lock
        assert store.lock_holder("demo").pid == proc.pid
    finally:
        proc.kill()
        proc.wait()
    store.refresh_lock("other")  # nobody holds it: nothing to extend, no error
