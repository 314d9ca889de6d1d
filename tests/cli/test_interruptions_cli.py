"""`fleet history NAME --interruptions`: the timeline of lost nodes on the local cloud, one with
a notice the node agent reported (through its real reporting seam) and one without."""

from __future__ import annotations

from cli.world import SMALL_SPEC, World
from fleet.agent.notice import Notice
from fleet.agent.report import report_notice


def test_timeline_of_a_noticed_and_an_unnoticed_loss(world: World):
    spec = world.spec("tl", SMALL_SPEC)
    assert world.fleet_json("up", str(spec), "--yes")["ok"]
    first, second = sorted(i.id for i in world.cloud.all_instances(alive_only=True) if i.fleet == "tl")
    now = world.cloud.now()
    # the agent on `first` got a 2-minute notice and saw the final checkpoint commit 30 s after its hook
    notice = Notice(kind="spot-interruption", deadline=now + 120, cloud="aws", received_at=now)
    assert report_notice(str(world.state), "tl", first, notice,
                         {"checkpoint_committed": True, "checkpoint_new": True, "checkpoint_step": 40,
                          "checkpoint_wait_s": 30.0, "hook_latency_s": 1.0, "watched_checkpoints": True})
    world.cloud.preempt(first)
    world.cloud.preempt(second)
    world.cloud.advance(60)
    world.fleet_json("status", "tl")                     # sees both gone: they are recorded preempted
    world.cloud.advance(30)
    assert world.fleet_json("up", str(spec), "--yes")["ok"]  # replaces them
    data = world.fleet_json("history", "tl", "--interruptions")
    lost = {i["instance_id"]: i for i in data["interruptions"]}
    assert set(lost) == {first, second}
    a, b = lost[first], lost[second]
    assert a["notice_kind"] == "spot-interruption" and abs(a["lead_seconds"] - 120) < 1e-6
    assert a["checkpoint_committed"] is True and a["checkpoint_step"] == 40
    assert abs(a["committed_before_deadline_s"] - (120 - 31)) < 1e-6
    assert b["notice_kind"] is None and b["lead_seconds"] is None and b["checkpoint_committed"] is None
    for i in (a, b):
        assert i["reason"] == "preempted" and i["detect_seconds"] is not None and 59 <= i["detect_seconds"] <= 62
        assert i["replacement_id"] and i["replacement_id"] not in (first, second)
        assert 89 <= i["replace_seconds"] <= 95
    assert a["replacement_id"] != b["replacement_id"]
    # the planner's model: a committed final checkpoint loses only the restart (300 s by default)
    assert abs(a["lost_seconds"] - 300) < 1e-9 and abs(a["lost_gpu_hours"] - 300 / 3600 * 8) < 1e-9
    tau = data["checkpoint_interval_seconds"]
    expected = (tau / 2 if tau is not None else 0.0) + 300
    assert abs(b["lost_seconds"] - expected) < 1e-9
    assert abs(b["lost_dollars"] - expected / 3600 * b["price_per_hour"]) < 1e-9
    assert data["totals"]["interruptions"] == 2 and data["totals"]["checkpoint_unknown"] == 1
    human = world.fleet("history", "tl", "--interruptions")
    assert human.returncode == 0, human.stderr
    assert "lost nodes (2" in human.stdout and "spot-interruption 2m00s ahead" in human.stdout
    assert "unknown" in human.stdout and "committed 1m29s before" in human.stdout
