"""`fleet dashboard` on a local-cloud fleet with a preemption: the JSON endpoints and pages
say what `fleet status --json` and `fleet history --interruptions --json` say, the server is
read-only and guarded (token off loopback, loopback Host names only), provider text is
escaped, and headless Chromium (Debian's `chromium`) shows it to a user."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cli.world import SMALL_SPEC, World

from fleet import nodelogs
from fleet.agent.logship import LogShipper
from fleet.agent.notice import Notice
from fleet.agent.report import report_notice
from fleet.cli.app import App
from fleet.dashboard import pages
from fleet.dashboard.server import Dashboard, Source
from providers.registry import local_cloud_root

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def preempted(tmp_path_factory: pytest.TempPathFactory) -> World:
    """Fleet `dash` of two nodes on a frozen clock, both preempted and replaced: ``noticed`` after
    a 2-minute notice its node agent reported (through the agent's own reporting seam) with the
    final checkpoint committed 30 s after the hook, ``unnoticed`` without a word."""
    world = World(tmp_path_factory.mktemp("dash"))
    spec = world.spec("dash", SMALL_SPEC)
    assert world.fleet_json("up", str(spec), "--yes")["ok"]
    noticed, unnoticed = sorted(i.id for i in world.cloud.all_instances(alive_only=True) if i.fleet == "dash")
    now = world.cloud.now()
    notice = Notice(kind="spot-interruption", deadline=now + 120, cloud="aws", received_at=now)
    assert report_notice(
        str(world.state),
        "dash",
        noticed,
        notice,
        {
            "checkpoint_committed": True,
            "checkpoint_new": True,
            "checkpoint_step": 40,
            "checkpoint_wait_s": 30.0,
            "hook_latency_s": 1.0,
            "watched_checkpoints": True,
        },
    )
    world.cloud.preempt(noticed)
    world.cloud.preempt(unnoticed)
    world.cloud.advance(60)
    world.fleet_json("status", "dash", ok=(0, 3))  # sees both gone: recorded preempted
    world.cloud.advance(30)
    assert world.fleet_json("up", str(spec), "--yes")["ok"]  # replaces them
    world.lost = (noticed, unnoticed)  # type: ignore[attr-defined]
    # the node of `noticed` shipped its log to the fleet's bucket, as `fleet run` does, with a hostile line
    log = world.root / "node.log"
    log.write_text("step 40 saved\n<img src=x onerror=alert(1)>\x1b[2J\n")
    store = world.store()
    try:
        uri = nodelogs.fleet_bucket(store, store.get_fleet("dash"), local_cloud_root(world.home))
    finally:
        store.close()
    assert LogShipper(uri, log, lambda: noticed).ship_once(final=True)
    return world


def test_history_interruptions(preempted: World):
    world = preempted
    first, second = world.lost  # type: ignore[attr-defined]
    data = world.fleet_json("history", "dash", "--interruptions")
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
    ran = b["lost_at"] - b["launched_at"]
    expected = (min(tau / 2, ran) if tau is not None else 0.0) + 300
    assert abs(b["lost_seconds"] - expected) < 1e-9
    assert abs(b["lost_dollars"] - expected / 3600 * b["price_per_hour"]) < 1e-9
    assert data["totals"]["interruptions"] == 2 and data["totals"]["checkpoint_unknown"] == 1
    human = world.fleet("history", "dash", "--interruptions")
    assert human.returncode == 0, human.stderr
    assert "lost nodes (2" in human.stdout and "spot-interruption 2m00s ahead" in human.stdout
    assert "unknown" in human.stdout and "committed 1m29s before" in human.stdout


def _serve(world: World):
    proc = world.spawn("dashboard", "--port", "0", "--interval", "1")
    line = proc.stdout.readline()  # type: ignore[union-attr]
    match = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
    assert match, (line, proc.poll())
    return proc, match.group(1)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=60) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)


def test_endpoints_match_status_and_history(preempted: World):
    world = preempted
    status = world.fleet_json("status", "dash")
    lost = world.fleet_json("history", "dash", "--interruptions")
    simulated = world.fleet_json("simulate", str(world.root / "dash.yaml"), "--days", "0.25", "--no-optimum", "--save")
    proc, base = _serve(world)
    try:
        code, body, headers = _get(base + "api/fleet/dash")
        assert code == 200 and "script-src 'sha256-" in headers["Content-Security-Policy"]
        data = json.loads(body)
        assert data["status"]["running"] == status["running"] == 2 and data["status"]["planned"] == 2
        assert data["status"]["cost"] == status["cost"]  # frozen clock: the very same figures
        assert data["status"]["planned_per_hour"] == status["planned_per_hour"] is not None
        assert data["status"]["billed_per_hour"] == status["billed_per_hour"] is not None  # read back after up
        assert data["status"]["bill"]["read"] == status["bill"]["read"] == 2
        assert "id=bill" in data["html"]
        assert data["simulation"]["result"] == simulated  # what `fleet simulate --save` printed
        assert all(p["policy"] in data["html"] for p in simulated["policies"]) and "id=simulation" in data["html"]
        assert data["plan_diffs"] == [] and "no change since the first plan" in data["html"]  # one plan so far
        looked = data["status"]["looked_at"]  # polls within --look-every reuse the look: no reconcile
        assert json.loads(_get(base + "api/fleet/dash")[1])["status"]["looked_at"] == looked
        assert json.loads(_get(base + "api/fleet/dash?refresh=1")[1])["status"]["looked_at"] > looked
        assert data["interruptions"] == lost
        assert {i["instance_id"] for i in data["interruptions"]["interruptions"]} == set(world.lost)
        assert all(victim in data["html"] for victim in world.lost) and "capacity (GPUs)" in data["html"]
        (node,) = data["logs"]["nodes"]  # the log `fleet logs` reads, escaped on the page
        assert node["instance"] == world.lost[0] and "step 40 saved" in data["html"]
        assert "&lt;img src=x onerror=alert(1)&gt;\\x1b[2J" in data["html"] and "<img" not in data["html"]
        offers = json.loads(_get(base + "api/fleet/dash/offers")[1])  # what `fleet offers --spec` lists
        listed = world.fleet_json("offers", "--spec", str(world.root / "dash.yaml"), "--limit", "0")
        assert offers["error"] == "" and offers["total"] == listed["total"] > 0
        assert [o["pool"] for o in offers["offers"]] == [o["pool"] for o in listed["offers"][: len(offers["offers"])]]
        assert "id=offers" in offers["html"] and "/fleet/dash/offers" in data["html"]
        assert _get(base + "fleet/dash/offers")[0] == 200
        fleets = json.loads(_get(base + "api/fleets")[1])
        row = next(r for r in fleets["rows"] if r["fleet"] == "dash")
        assert row["cost_so_far"] == status["cost"]["cost_so_far"] and row["running"] == 2
        page = _get(base + "fleet/dash")[1].decode()
        assert "<svg" in page and "data-api='/api/fleet/dash'" in page
        assert _get(base + "fleet/nope")[0] == 404
        assert _get(base, {"Host": "evil.example:80"})[0] == 403  # DNS rebinding
        req = urllib.request.Request(base + "api/fleets", data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=60)
        assert refused.value.code == 405
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_token_required_when_set(tmp_path: Path):
    world = World(tmp_path)
    server = Dashboard(Source(App(home=world.home)), "127.0.0.1", 0, token="s3cr3t-token")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        assert server.url == base + "?token=s3cr3t-token"
        assert _get(base)[0] == 403 and _get(base + "?token=wrong")[0] == 403
        code, body, _ = _get(base + "?token=s3cr3t-token")
        assert code == 200 and b"fleets" in body
        assert b"/api/fleets?token=s3cr3t-token" in body  # the page polls with it
    finally:
        server.shutdown()
        server.server_close()
    other = Dashboard(Source(App(home=world.home)), "127.0.0.2", 0)  # loopback: no token
    other.server_close()
    assert other.token == ""


def test_provider_text_is_escaped():
    hostile = "<script>alert(1)</script>\x1b]0;x\x07"
    row = {
        "fleet": hostile,
        "status": "up",
        "running": 1,
        "planned": 1,
        "gpus": 8,
        "price_per_hour": 1.0,
        "planned_per_hour": 1.0,
        "billed_per_hour": None,
        "cost_so_far": 2.0,
        "savings": None,
        "savings_fraction": None,
        "provider_errors": {},
        "error": hostile,
    }
    html = pages.fleets_body([row], 0, hostile)
    assert "<script>" not in html and "&lt;script&gt;" in html and "\x1b" not in html
    logs = pages.node_logs(
        {
            "error": "",
            "nodes": [
                {
                    "instance": hostile,
                    "size": 1,
                    "updated_at": 0.0,
                    "final": True,
                    "tail": f"line {hostile}\nAuthorization: Bearer abcdefghijklmnop",
                }
            ],
        }
    )
    assert "<script" not in logs and "\x1b" not in logs and "abcdefghijklmnop" not in logs and "line &lt;" in logs
    assert "abcdefghijklmnop" not in pages.h("Authorization: Bearer abcdefghijklmnop")
    refused = pages.offers_body(
        {"fleet": hostile, "error": hostile, "offers": [], "total": 0, "source": "", "detail": ""}
    )
    assert "<script>" not in refused and "\x1b" not in refused and "&lt;script&gt;" in refused
    pool = {"provider": "vast", "region": hostile, "zone": "", "instance_type": hostile, "market": "spot"}
    listed = pages.offers_body(
        {
            "fleet": "f",
            "error": "",
            "total": 1,
            "source": "live",
            "detail": hostile,
            "offers": [
                {
                    "pool": pool,
                    "gpus": 1,
                    "accelerator": hostile,
                    "price_per_hour": 1.0,
                    "price_per_gpu_hour": 1.0,
                    "interruptions_per_hour": 0.1,
                }
            ],
        }
    )
    assert "<script>" not in listed and "\x1b" not in listed and listed.count("&lt;script&gt;") == 4


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_browser_shows_the_fleet(preempted: World, tmp_path: Path):
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; .ci/run installs Debian's chromium")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    world = preempted
    status = world.fleet_json("status", "dash")
    proc, base = _serve(world)
    common = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=3000",
    ]
    try:
        dom = subprocess.run(
            [*common, "--dump-dom", base + "fleet/dash"], capture_output=True, text=True, timeout=120
        ).stdout
        assert f"running: {status['running']} of {status['planned']} planned" in dom
        cost = pages.money(status["cost"]["cost_so_far"])
        assert f"cost so far: {cost}" in dom
        assert re.search(r"updated \d", dom), "the page's script did not refresh it"
        assert all(f'data-instance="{victim}"' in dom for victim in world.lost) and "preempted" in dom
        assert "spot-interruption, 2m00s ahead" in dom and "committed 1m29s before the deadline" in dom
        billed = pages.money(status["bill"]["billed_per_hour"], True)
        assert f"$/h billed: {billed}" in dom and f"billed {billed} for 2 of 2 running instance(s)" in dom
        assert "plan changes" in dom and "no change since the first plan" in dom
        fleets = subprocess.run([*common, "--dump-dom", base], capture_output=True, text=True, timeout=120).stdout
        assert "dash" in fleets and cost in fleets
        shots = []
        for name, url in (("fleets", base), ("fleet", base + "fleet/dash")):
            shot = tmp_path / f"dashboard-{name}.png"
            subprocess.run(
                [*common, f"--screenshot={shot}", "--window-size=1280,900", url], capture_output=True, timeout=120
            )
            assert shot.exists() and shot.stat().st_size > 10_000
            shots.append(shot)
        if os.environ.get("SPOTFLEET_SAVE_SCREENSHOT"):
            shutil.copy(shots[1], REPO / "docs" / "images" / "dashboard.png")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
