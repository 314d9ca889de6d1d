"""The interruption timeline (``fleet.views.interruptions``) from plain store records: roles
keep replacements apart, advice is no notice, unknown stays unknown, and the work-lost model
is the planner's."""

from __future__ import annotations

from fleet.state import EventRecord, InstanceRecord
from fleet.views.interruptions import timeline, totals

W = "aws/us-east-1/use1-az1/p5.48xlarge/spot"
H = "aws/us-east-1/use1-az1/m5.xlarge/on-demand"


def rec(
    id: str,
    pool: str,
    launched: float,
    ended: float | None = None,
    reason: str = "",
    gpus: int = 8,
    price: float = 10.0,
) -> InstanceRecord:
    return InstanceRecord(
        fleet="f",
        id=id,
        pool=pool,
        market=pool.rsplit("/", 1)[1],
        accelerator="H100",
        gpus=gpus,
        price_per_hour=price,
        launched_at=launched,
        ended_at=ended,
        end_reason=reason,
    )


def ev(id: int, event: str, instance: str, ts: float, **detail) -> EventRecord:
    return EventRecord(id=id, fleet="f", ts=ts, kind=event, instance_id=instance, detail=detail)


def test_replacement_in_the_same_role_and_unknowns():
    records = [
        rec("w1", W, 0, 1000, "preempted"),
        rec("h1", H, 0, 1100, "lost", gpus=0, price=0.2),
        rec("h2", H, 1150, gpus=0, price=0.2),
        rec("w2", W, 1300),
    ]
    events = [
        ev(1, "interruption-notice", "w1", 900, kind="rebalance", deadline=2000.0, received_at=900.0),
        ev(2, "preempted", "w1", 1000, detected_at=1030.0),
        ev(3, "lost", "h1", 1100),
    ]
    items = {
        i.instance_id: i
        for i in timeline(records, events, roles={H: "head"}, restart_seconds=120, checkpoint_interval_seconds=600.0)
    }
    w, h = items["w1"], items["h1"]
    assert w.notice_kind is None  # a rebalance recommendation is advice, not a notice
    assert (w.detect_seconds, w.replacement_id, w.replace_seconds) == (30.0, "w2", 300.0)
    assert (h.role, h.replacement_id, h.replace_seconds, h.detect_seconds) == ("head", "h2", 50.0, None)
    assert w.checkpoint_committed is None and w.committed_before_deadline_s is None  # no report: unknown
    assert w.lost_seconds == 600 / 2 + 120 and abs(w.lost_dollars - 420 / 3600 * 10) < 1e-12
    assert totals(items.values())["replaced"] == 2


def test_final_notice_and_committed_checkpoint_lose_only_the_restart():
    records = [rec("w1", W, 0, 1000, "preempted")]
    events = [
        ev(
            1,
            "interruption-notice",
            "w1",
            880,
            kind="spot-interruption",
            deadline=1000.0,
            received_at=880.0,
            checkpoint_committed=True,
            checkpoint_new=True,
            checkpoint_wait_s=20.0,
            hook_latency_s=0.0,
            watched_checkpoints=True,
            checkpoint_step=7,
        )
    ]
    (i,) = timeline(records, events, roles={}, restart_seconds=60, checkpoint_interval_seconds=None)
    assert (i.notice_kind, i.lead_seconds, i.checkpoint_step, i.committed_before_deadline_s) == (
        "spot-interruption",
        120.0,
        7,
        100.0,
    )
    assert i.lost_seconds == 60 and i.replacement_id is None and i.replace_seconds is None
    (j,) = timeline(records, events[:0], roles={}, restart_seconds=60, checkpoint_interval_seconds=None)
    assert j.lost_seconds == 60 and "unknown" in j.model  # no planned interval: only the restart counted


def test_series_ends_at_the_cost_status_shows():
    from fleet.provisioning.accounting import summarize
    from fleet.views.history import series

    records = [rec("a", W, 0, 1800, "preempted"), rec("b", W, 600, price=4.0), rec("c", H, 900, 950, "lost", 0, 1.0)]
    points = series(records, 3600, points=13)
    assert [p["t"] for p in points] == [300.0 * k for k in range(13)]
    assert [p["running"] for p in points[:4]] == [1, 1, 2, 3] and points[-1]["running"] == 1
    assert points[6]["gpus"] == 8 and points[6]["spot_gpus"] == 8 and points[6]["rate_per_hour"] == 4.0
    assert abs(points[-1]["cost"] - summarize(records, 3600).cost_so_far) < 1e-9
