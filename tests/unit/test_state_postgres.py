"""What only the PostgreSQL store has to get right (its shared behaviour is tested in
``test_state.py`` over both backends): migrations, refusing foreign or newer databases,
clear errors for a bad URL, and a fleet lock that holds across machines."""

from __future__ import annotations

import psycopg
import pytest

from fleet.errors import FleetLockedError, StateError
from fleet.state import UnwritableStoreError, open_store
from fleet.state.migrations.postgres import SCHEMA_VERSION
from fleet.state.postgres import redacted


@pytest.fixture
def url(postgres_cluster) -> str:
    return postgres_cluster.new_database()


def _sql(url: str, sql: str, args: tuple = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql, args)
        return cur.fetchall() if cur.description else []


def test_a_fresh_database_is_migrated_once_and_reopened_as_is(url):
    store = open_store(url)
    store.save_fleet("demo", status="up", spec_json="{}", spec_hash="h")
    store.close()
    assert _sql(url, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    again = open_store(url, create=False)
    assert again.get_fleet("demo").status == "up"
    again.close()


def test_an_empty_database_without_create_points_to_up_and_repair(url):
    with pytest.raises(StateError, match="no state store at .*fleet up SPEC"):
        open_store(url, create=False)


def test_a_foreign_database_is_refused(url):
    _sql(url, "CREATE TABLE fleets (id INTEGER)")
    with pytest.raises(StateError, match="not a spotfleet state store"):
        open_store(url)


def test_a_newer_schema_is_refused(url):
    open_store(url).close()
    _sql(url, "UPDATE schema_version SET version = 99")
    with pytest.raises(StateError, match="schema v99, newer"):
        open_store(url)


def test_an_unreachable_server_is_one_clear_line_without_the_password(postgres_cluster):
    bad = f"postgresql://spotfleet:s3cret@127.0.0.1:{postgres_cluster.port + 1}/nope"
    with pytest.raises(StateError) as err:
        open_store(bad)
    text = str(err.value)
    assert "cannot open the state store" in text and "s3cret" not in text and "***" in text
    assert redacted("postgresql://u@h/db") == "postgresql://u@h/db"


def test_the_lock_of_a_holder_on_another_machine_holds_until_its_lease_ends(url):
    store = open_store(url)
    now = float(_sql(url, "SELECT extract(epoch from clock_timestamp())")[0][0])
    _sql(
        url,
        "INSERT INTO locks VALUES (%s, %s, %s, %s, %s, %s, %s)",
        ("demo", "build-7:4242:99", 4242, "build-7", "rebalance", now, now + 600),
    )
    with pytest.raises(FleetLockedError, match=r"`fleet rebalance` \(pid 4242 on build-7\)"):
        store.acquire_lock("demo", "up")
    _sql(url, "UPDATE locks SET expires_at = %s", (now - 1,))  # its lease ran out: taken over
    with store.lock("demo", "up") as info:
        assert store.lock_holder("demo").owner == info.owner
    assert store.lock_holder("demo") is None
    store.close()


def test_two_connections_never_both_take_a_lock(url):
    a, b = open_store(url), open_store(url)
    try:
        with a.lock("demo", "rebalance"):
            # the same process owns both connections, so the holder counts as itself: use a foreign owner
            _sql(url, "UPDATE locks SET owner = 'elsewhere:1:1', host = 'elsewhere'")
            with pytest.raises(FleetLockedError):
                b.acquire_lock("demo", "rebalance")
    finally:
        a.close()
        b.close()


def test_a_read_only_database_is_named_as_such_and_can_still_be_read(url):
    store = open_store(url)
    store.save_fleet("demo", status="up", spec_json="{}", spec_hash="h")
    store.close()
    database = url.rsplit("/", 1)[1].split("?", 1)[0]
    _sql(url, f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
    with pytest.raises(UnwritableStoreError, match="cannot be written"):
        open_store(url, create=False)
    reader = open_store(url, create=False, read_only=True)
    assert reader.read_only and reader.get_fleet("demo").status == "up"
    with pytest.raises(UnwritableStoreError):
        reader.set_status("demo", "down")
    reader.close()
