"""``fleet rebalance --every`` as a service: passes in a loop, Prometheus metrics and a health
endpoint on ``--metrics-port``, a clean stop on SIGTERM."""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.error
import urllib.request

from cli.world import World


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _sample(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if not line.startswith(name + "{") and line.split(" ")[0] != name:
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_looping_rebalancer_serves_metrics_and_health_and_stops_on_sigterm(world: World):
    assert world.fleet_json("up", str(world.spec()), "--yes")["ok"]
    spot = sorted(i.id for i in world.created("chaos") if i.pool.market.value == "spot")
    world.cloud.preempt(spot[0])
    proc = world.spawn("rebalance", "chaos", "--every", "1s", "--metrics-port", "0", "--json")
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        port = int(re.search(r"metrics on port (\d+)", line).group(1))
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        text = ""
        while time.time() < deadline:
            text = _get(base + "/metrics")[1]
            if (_sample(text, "spotfleet_passes_total", fleet="chaos", result="ok") or 0) >= 2:
                break
            time.sleep(0.5)
        assert _sample(text, "spotfleet_target_weighted_gpus", fleet="chaos") == 64
        assert _sample(text, "spotfleet_baseline_weighted_gpus", fleet="chaos") == 16
        running = sum(
            _sample(text, "spotfleet_running_weighted_gpus", fleet="chaos", provider=p, market=m) or 0
            for p in ("aws", "gcp", "azure", "vast")
            for m in ("spot", "on-demand")
        )
        assert running == 64
        assert _sample(text, "spotfleet_interruptions_total", fleet="chaos") == 1
        assert (
            _sample(text, "spotfleet_actions_total", fleet="chaos", kind="launch", reason="replace-lost", done="true")
            == 1
        )
        assert _sample(text, "spotfleet_last_pass_ok", fleet="chaos") == 1
        assert (_sample(text, "spotfleet_price_per_hour_dollars", fleet="chaos") or 0) > 0
        lost_pool = next(i.pool.id for i in world.created("chaos") if i.id == spot[0])
        by_notice = [line for line in text.splitlines() if line.startswith("spotfleet_node_interruptions_total{")]
        assert len(by_notice) == 1 and f'pool="{lost_pool}"' in by_notice[0] and by_notice[0].endswith(" 1.0")
        lost = world.fleet_json("history", "chaos", "--interruptions")  # the same timeline, counted once
        assert _sample(text, "spotfleet_time_to_detect_seconds_count", fleet="chaos") == 1
        assert (
            _sample(text, "spotfleet_time_to_detect_seconds_sum", fleet="chaos")
            == lost["interruptions"][0]["detect_seconds"]
        )
        assert (_sample(text, "spotfleet_time_to_replace_seconds_count", fleet="chaos") or 0) == lost["totals"][
            "replaced"
        ]  # the frozen clock dates the replacement with the loss: not counted
        assert (
            _sample(text, "spotfleet_last_time_to_detect_seconds", fleet="chaos")
            == lost["interruptions"][0]["detect_seconds"]
        )
        planned = _sample(text, "spotfleet_planned_per_hour_dollars", fleet="chaos")
        billed = _sample(text, "spotfleet_billed_per_hour_dollars", fleet="chaos")
        assert planned and billed and abs(planned - billed) < 1e-6  # the local cloud bills what it offered
        assert _sample(text, "spotfleet_billed_instances", fleet="chaos") == sum(world.alive("chaos").values())
        status = world.fleet_json("status", "chaos")
        assert _sample(text, "spotfleet_cost_so_far_dollars", fleet="chaos") == status["cost"]["cost_so_far"]
        assert abs(billed - status["bill"]["billed_per_hour"]) < 1e-9
        assert _sample(text, "spotfleet_bill_breaches", fleet="chaos") == 0
        assert _get(base + "/healthz") == (200, "ok\n")
        assert _get(base + "/nope")[0] == 404
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    reports = [json.loads(doc) for doc in re.split(r"(?m)^(?=\{)", out) if doc.strip()]
    assert len(reports) >= 2 and reports[-1]["at_target"]


def test_metrics_port_needs_every_and_every_needs_a_duration(world: World):
    assert world.fleet_json("up", str(world.spec()), "--yes")["ok"]
    proc = world.fleet("rebalance", "chaos", "--metrics-port", "9000")
    assert proc.returncode == 1 and "--metrics-port needs --every" in proc.stderr
    proc = world.fleet("rebalance", "chaos", "--every", "soon")
    assert proc.returncode == 1 and "cannot read duration 'soon'" in proc.stderr


def test_passes_stops_the_loop(world: World):
    assert world.fleet_json("up", str(world.spec()), "--yes")["ok"]
    proc = world.fleet("rebalance", "chaos", "--every", "1s", "--passes", "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("nothing to do") == 2


def test_watch_replaces_a_lost_node_at_once_not_at_the_next_pass(world: World):
    """``--watch 1s --every 1h``: after the first pass only a change starts one, so the process
    ending after its second pass with the fleet back at target shows the loss started it."""
    assert world.fleet_json("up", str(world.spec()), "--yes")["ok"]
    target = sum(world.alive("chaos").values())
    proc = world.spawn("rebalance", "chaos", "--watch", "1s", "--every", "1h", "--passes", "2")
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the first pass has run
        assert "nothing to do" in first, first
        spot = sorted(i.id for i in world.created("chaos") if i.state.alive and i.pool.market.value == "spot")
        world.cloud.preempt(spot[0])
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "replace-lost" in out and "done" in out, out
    assert sum(world.alive("chaos").values()) == target


def test_watch_needs_a_duration(world: World):
    proc = world.fleet("rebalance", "chaos", "--watch", "0s")
    assert proc.returncode == 1 and "--watch 0s: give a positive duration" in proc.stderr


def test_each_lost_node_is_counted_once_and_its_delays_observed_as_they_become_known():
    from prometheus_client import generate_latest

    from fleet.rebalance.metrics import Metrics

    metrics = Metrics("m")
    node = {
        "instance_id": "i-1",
        "pool": "aws/r/z/t/spot",
        "notice_kind": "terminate",
        "lost_at": 100.0,
        "detect_seconds": 12.0,
        "replace_seconds": None,
    }
    metrics.record_timeline([node])
    metrics.record_timeline(
        [
            {**node, "replace_seconds": 95.0},  # replaced since
            {
                **node,
                "instance_id": "i-2",
                "notice_kind": None,
                "lost_at": 200.0,
                "detect_seconds": 3.0,
                "replace_seconds": 40.0,
            },
        ]
    )
    text = generate_latest(metrics.registry).decode()
    assert _sample(text, "spotfleet_node_interruptions_total", fleet="m", notice="terminate") == 1
    assert _sample(text, "spotfleet_node_interruptions_total", fleet="m", notice="none") == 1
    assert _sample(text, "spotfleet_time_to_detect_seconds_count", fleet="m") == 2
    assert _sample(text, "spotfleet_time_to_detect_seconds_sum", fleet="m") == 15.0
    assert _sample(text, "spotfleet_time_to_replace_seconds_count", fleet="m") == 2
    assert _sample(text, "spotfleet_time_to_replace_seconds_sum", fleet="m") == 135.0
    assert _sample(text, "spotfleet_time_to_replace_seconds_bucket", fleet="m", le="60.0") == 1
    assert _sample(text, "spotfleet_last_time_to_replace_seconds", fleet="m") == 40.0  # the newest loss's
