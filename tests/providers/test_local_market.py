"""The local cloud as a market: trace-driven capacity and preemption, notices, determinism
by seed, persistence and safety across processes, the simulated clock."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fleet.errors import FleetError
from fleet.model import InstanceState, InterruptionSource, LaunchRequest, fleet_tags
from fleet.traces import all_traces, trace_for_zone
from providers.base import OfferQuery
from providers.local import LocalCloud
from providers.local.vendors import VENDORS

GCP_ZONE = "us-west1-b"  # the scarcest recorded zone: 24% available
GCP_POOLS = [f"gcp/us-west1/{GCP_ZONE}/a3-highgpu-8g/spot", f"gcp/us-west1/{GCP_ZONE}/a3-highgpu-1g/spot"]
ON_DEMAND = "aws/us-east-1/use1-az4/p5.48xlarge/on-demand"


def _frozen(tmp_path: Path, seed: int = 0, name: str = "cloud") -> LocalCloud:
    return LocalCloud.open(tmp_path / name, time_scale=0, seed=seed)


def _offer(cloud: LocalCloud, pool_id: str):
    provider = cloud.provider(pool_id.split("/")[0])
    return next(o for o in provider.list_offers(OfferQuery()) if o.pool.id == pool_id)


def _launch(cloud: LocalCloud, pool_id: str, count: int, token: str, fleet: str = "alpha"):
    offer = _offer(cloud, pool_id)
    req = LaunchRequest(fleet=fleet, offer=offer, count=count, token=token, tags=fleet_tags(fleet, offer.pool))
    return cloud.provider(offer.pool.provider).launch(req)


def _advance_until(cloud: LocalCloud, pool_id: str, available: bool, step: float = 600, limit: int = 3000) -> None:
    for _ in range(limit):
        if (cloud.free_capacity(pool_id) > 0) == available:
            return
        cloud.advance(step)
    raise AssertionError(f"{pool_id} never became {'available' if available else 'unavailable'}")


# ---- the market follows the traces ---------------------------------------------------------


def test_gcp_h100_capacity_follows_its_zones_trace(tmp_path):
    cloud = _frozen(tmp_path)
    trace = trace_for_zone(GCP_ZONE)
    cloud.advance(trace.gap_seconds / 2)  # sample mid-tick
    seen = []
    for _ in range(300):
        seen.append(tuple(cloud.free_capacity(p) > 0 for p in GCP_POOLS))
        cloud.advance(trace.gap_seconds)
    assert all(a == b for a, b in seen), "pools of one zone share its trace"
    observed = "".join("1" if a else "0" for a, _ in seen)
    recorded = "".join("1" if a else "0" for a in trace.available)
    assert observed in recorded + recorded, "capacity over time is a window of the recorded trace"
    assert "0" in observed and "1" in observed


def test_spot_offers_carry_trace_derived_risk_and_capacity(tmp_path):
    cloud = _frozen(tmp_path)
    gcp = {o.pool.id: o for o in cloud.provider("gcp").list_offers(OfferQuery(on_demand=False))}
    offer = gcp[GCP_POOLS[0]]
    assert offer.source == "local" and offer.interruption_source is InterruptionSource.TRACE
    assert offer.interruptions_per_hour == pytest.approx(
        trace_for_zone(GCP_ZONE).preemptions_per_hour + VENDORS["gcp"].hazard_per_hour
    )
    aws = cloud.provider("aws").list_offers(OfferQuery(on_demand=False))
    rates = {round(o.interruptions_per_hour, 9) for o in aws}
    allowed = {round(t.preemptions_per_hour + VENDORS["aws"].hazard_per_hour, 9) for t in all_traces()}
    assert rates <= allowed and len(rates) > 5, "pools map onto different traces"
    hints = [o.capacity_hint for o in aws]
    assert 0 in hints and max(hints) > 0, "some pools are out of capacity now, others are not"
    on_demand = cloud.provider("aws").list_offers(OfferQuery(spot=False))
    assert all(o.capacity_hint >= 100 and o.interruptions_per_hour == 0 for o in on_demand)


def test_capacity_is_consumed_by_running_instances(tmp_path):
    cloud = _frozen(tmp_path)
    cloud.set_capacity(ON_DEMAND, 5)
    assert _offer(cloud, ON_DEMAND).capacity_hint == 5
    assert len(_launch(cloud, ON_DEMAND, 3, "t1").instances) == 3
    assert _offer(cloud, ON_DEMAND).capacity_hint == 2
    second = _launch(cloud, ON_DEMAND, 3, "t2")
    assert len(second.instances) == 2 and second.error_code == "InsufficientInstanceCapacity"
    cloud.provider("aws").terminate([second.instances[0].id])
    assert _offer(cloud, ON_DEMAND).capacity_hint == 1


def test_spot_instances_are_preempted_when_the_trace_turns_unavailable(tmp_path):
    cloud = _frozen(tmp_path)
    pool = GCP_POOLS[0]
    _advance_until(cloud, pool, available=True)
    ids = [i.id for i in _launch(cloud, pool, 3, "t1").instances]
    assert len(ids) == 3 and all(i.isdigit() for i in ids), "GCP ids are numeric"
    _advance_until(cloud, pool, available=False)
    assert cloud.provider("gcp").list_instances("alpha") == []
    ended = {i.id: i for i in cloud.all_instances()}
    now = cloud.now()
    for iid in ids:
        assert ended[iid].state is InstanceState.PREEMPTED and ended[iid].ended_at <= now
    result = _launch(cloud, pool, 1, "t2")
    assert result.instances == () and result.error_code == "ZONE_RESOURCE_POOL_EXHAUSTED"


def test_on_demand_instances_are_never_preempted(tmp_path):
    cloud = _frozen(tmp_path)
    ids = {i.id for i in _launch(cloud, ON_DEMAND, 4, "t1").instances}
    cloud.advance(30 * 86400)
    assert {i.id for i in cloud.provider("aws").list_instances("alpha")} == ids
    assert all(i.state is InstanceState.RUNNING for i in cloud.provider("aws").list_instances("alpha"))


def test_notices_precede_natural_preemptions_by_the_vendor_window(tmp_path):
    cloud = _frozen(tmp_path)
    aws = cloud.provider("aws")
    pool = next(
        o.pool.id
        for o in sorted(aws.list_offers(OfferQuery(on_demand=False)), key=lambda o: -o.interruptions_per_hour)
        if (o.capacity_hint or 0) >= 10
    )
    ids = [i.id for i in _launch(cloud, pool, 10, "t1").instances]
    preempted: set[str] = set()
    for _ in range(5000):
        cloud.advance(100)
        now = cloud.now()
        alive = {i.id for i in aws.list_instances("alpha")}
        for iid in alive:
            notice = cloud.notices / f"{iid}.json"
            if notice.exists():
                body = json.loads(notice.read_text())
                assert body["action"] == "terminate" and 0 < body["time"] - now <= 120
        preempted |= set(ids) - alive
        if len(preempted) >= 3:
            break
    assert len(preempted) >= 3
    ended = {i.id: i for i in cloud.all_instances()}
    for iid in preempted:
        assert ended[iid].state is InstanceState.PREEMPTED
        assert json.loads((cloud.notices / f"{iid}.json").read_text())["time"] == pytest.approx(
            ended[iid].ended_at, abs=1
        )


@pytest.mark.parametrize("provider, window", [("aws", 120), ("gcp", 30), ("azure", 30)])
def test_manual_preemption_with_notice_waits_the_vendor_window(tmp_path, provider, window):
    cloud = _frozen(tmp_path)
    p = cloud.provider(provider)
    offer = sorted((o for o in p.list_offers(OfferQuery(spot=False))), key=lambda o: o.pool.id)[0]
    inst = _launch(cloud, offer.pool.id, 1, "t1").instances[0]
    now = cloud.now()
    cloud.preempt(inst.id, notice=True)
    body = json.loads((cloud.notices / f"{inst.id}.json").read_text())
    assert body == {"action": "terminate", "time": pytest.approx(now + window, abs=1)}
    cloud.advance(window - 1)
    assert [i.id for i in p.list_instances("alpha")] == [inst.id]
    cloud.advance(2)
    assert p.list_instances("alpha") == []


def test_vast_gives_no_notice(tmp_path):
    cloud = _frozen(tmp_path)
    offer = sorted(cloud.provider("vast").list_offers(OfferQuery()), key=lambda o: o.pool.id)[0]
    inst = _launch(cloud, offer.pool.id, 1, "t1").instances[0]
    gone = cloud.preempt(inst.id, notice=True)
    assert gone.state is InstanceState.PREEMPTED
    assert not (cloud.notices / f"{inst.id}.json").exists()


def test_preempting_an_unknown_instance_names_the_fix(tmp_path):
    with pytest.raises(FleetError, match="fleet local status"):
        _frozen(tmp_path).preempt("i-0000000000000000")


# ---- determinism -----------------------------------------------------------------------------


def _history(cloud: LocalCloud) -> list[tuple]:
    for n, provider in enumerate(("aws", "gcp", "azure", "vast")):
        offers = sorted(
            (
                o
                for o in cloud.provider(provider).list_offers(OfferQuery(on_demand=False))
                if (o.capacity_hint or 0) >= 4
            ),
            key=lambda o: o.pool.id,
        )[:3]
        for k, offer in enumerate(offers):
            _launch(cloud, offer.pool.id, 4, f"t{n}-{k}")
    for _ in range(48):
        cloud.advance(1800)
    hints = [o.capacity_hint for o in cloud.provider("aws").list_offers(OfferQuery(accelerators=("A10G",)))]
    return [
        (i.id, i.pool.id, i.state.value, None if i.ended_at is None else i.ended_at - cloud.start)
        for i in cloud.all_instances()
    ] + [tuple(hints)]


def test_same_seed_same_market_and_history(tmp_path):
    a = _history(_frozen(tmp_path, seed=7, name="a"))
    b = _history(_frozen(tmp_path, seed=7, name="b"))
    assert a == b
    assert any(state == "preempted" for _, _, state, _ in a[:-1]), "a day of spot has preemptions"
    c = _history(_frozen(tmp_path, seed=8, name="c"))
    assert c != a


# ---- persistence and concurrency -------------------------------------------------------------

CHILD = """
import json, sys
from providers.local import LocalCloud
from fleet.model import LaunchRequest, fleet_tags
from providers.base import OfferQuery
cloud = LocalCloud.open(sys.argv[1])
action = sys.argv[2]
if action == "list":
    print(json.dumps(sorted(i.id for i in cloud.provider("aws").list_instances("alpha"))))
else:
    pool = sys.argv[3]
    offer = next(o for o in cloud.provider("aws").list_offers(OfferQuery()) if o.pool.id == pool)
    req = LaunchRequest(fleet="alpha", offer=offer, count=int(sys.argv[4]), token=action,
                        tags=fleet_tags("alpha", offer.pool))
    print(json.dumps([i.id for i in cloud.provider("aws").launch(req).instances]))
"""


def _child(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE, text=True)


def test_another_process_sees_and_extends_the_same_cloud(tmp_path):
    cloud = _frozen(tmp_path)
    mine = [i.id for i in _launch(cloud, ON_DEMAND, 2, "parent").instances]
    listed = json.loads(_child(str(cloud.root), "list").communicate()[0])
    assert listed == sorted(mine)
    theirs = json.loads(_child(str(cloud.root), "child-token", ON_DEMAND, "3").communicate()[0])
    assert len(theirs) == 3
    assert sorted(i.id for i in cloud.provider("aws").list_instances("alpha")) == sorted(mine + theirs)


def test_concurrent_processes_never_overfill_a_pool(tmp_path):
    cloud = _frozen(tmp_path)
    cloud.set_capacity(ON_DEMAND, 7)
    children = [_child(str(cloud.root), f"proc-{n}", ON_DEMAND, "5") for n in range(3)]
    made = [json.loads(c.communicate()[0]) for c in children]
    assert sum(len(m) for m in made) == 7
    assert len(cloud.provider("aws").list_instances("alpha")) == 7


def test_processes_racing_to_create_a_cloud_share_one(tmp_path):
    root = tmp_path / "fresh"
    children = [_child(str(root), f"proc-{n}", ON_DEMAND, "2") for n in range(3)]
    made = [json.loads(c.communicate()[0]) for c in children]
    assert all(len(m) == 2 for m in made)
    assert sorted(i.id for i in LocalCloud.open(root).all_instances()) == sorted(i for m in made for i in m)


def test_concurrent_threads_never_overfill_a_pool_or_duplicate_a_token(tmp_path):
    cloud = _frozen(tmp_path)
    cloud.set_capacity(ON_DEMAND, 10)
    results: list[tuple[str, list[str]]] = []

    def work(n: int) -> None:
        token = f"tok-{n % 3}"  # three tokens, eight callers
        results.append((token, [i.id for i in _launch(cloud, ON_DEMAND, 4, token).instances]))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    alive = cloud.provider("aws").list_instances("alpha")
    assert len(alive) == 10, "three tokens of four, capped at ten"
    by_token: dict[str, list[str]] = {}
    for token, ids in results:
        assert by_token.setdefault(token, ids) == ids, "a token always answers the same instances"
    assert {i.id for i in alive} == {i for ids in by_token.values() for i in ids}


# ---- the clock and settings ---------------------------------------------------------------


def test_clock_runs_at_the_time_scale(tmp_path):
    cloud = LocalCloud.open(tmp_path / "c", time_scale=3600)
    real_before = time.time()
    sim = cloud.now()
    real_after = time.time()
    assert (
        cloud.start + (real_before - cloud.created) * 3600 <= sim <= cloud.start + (real_after - cloud.created) * 3600
    )
    cloud.advance(500)
    real_before = time.time()
    sim = cloud.now()
    real_after = time.time()
    assert sim - 500 >= cloud.start + (real_before - cloud.created) * 3600
    assert sim - 500 <= cloud.start + (real_after - cloud.created) * 3600


def test_settings_are_fixed_at_creation_and_reset_changes_them(tmp_path, caplog):
    first = LocalCloud.open(tmp_path / "c", time_scale=0, seed=3)
    _launch(first, ON_DEMAND, 2, "t1")
    with caplog.at_level(logging.WARNING):
        again = LocalCloud.open(tmp_path / "c", time_scale=120, seed=3)
    assert (again.time_scale, again.seed) == (0, 3)
    assert "fleet local reset --time-scale 120" in caplog.text
    fresh = LocalCloud.reset(tmp_path / "c", time_scale=600)
    assert (fresh.time_scale, fresh.seed) == (600, 3)
    assert fresh.all_instances() == []


def test_a_corrupt_cloud_file_names_the_fix_and_reset_recovers(tmp_path):
    root = tmp_path / "c"
    root.mkdir()
    (root / "cloud.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(FleetError, match="fleet local reset"):
        LocalCloud.open(root)
    assert LocalCloud.reset(root, time_scale=0).all_instances() == []


def test_buckets_are_directories_under_the_cloud(tmp_path):
    from providers.base import StorageSpec

    cloud = _frozen(tmp_path)
    ref = cloud.provider("gcp").ensure_bucket(StorageSpec(provider="gcp", bucket="alpha-checkpoints"))
    path = Path(ref.uri.removeprefix("file://"))
    assert ref.uri.startswith("file://") and path.is_dir() and path.parent == cloud.buckets


def test_notice_carries_the_preemption_on_the_wall_clock(tmp_path):
    """A node can only wait on the wall clock: the notice dates the preemption there too."""
    import json
    import time

    from fleet.model import LaunchRequest, Market, fleet_tags
    from providers.base import OfferQuery
    from providers.local import LocalCloud

    cloud = LocalCloud.open(tmp_path / "c", time_scale=60.0, seed=3)
    aws = cloud.provider("aws")
    offer = next(
        o
        for o in aws.list_offers(OfferQuery(accelerators=("H100",)))
        if o.market is Market.SPOT and (o.capacity_hint or 0) > 0
    )
    launched = aws.launch(
        LaunchRequest(fleet="f1", offer=offer, count=1, token="t-wall", tags=fleet_tags("f1", offer.pool))
    )
    iid = launched.instances[0].id
    cloud.preempt(iid, notice=True)
    doc = json.loads((cloud.notices / f"{iid}.json").read_text())
    assert doc["action"] == "terminate"
    # aws's 120 simulated seconds of notice are two real seconds at 60x
    assert 0 < doc["wall_deadline"] - time.time() <= 120 / 60 + 0.5
