"""Each watcher against its fake metadata service: notices, token refresh, acks, hiccups."""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from fleet.agent import WatcherOptions, detect_cloud, http, make_watcher
from fleet.agent.aws import AwsWatcher
from fleet.agent.azure import AzureWatcher
from fleet.agent.detect import instance_id
from fleet.agent.gcp import GceWatcher
from fleet.agent.local import LocalWatcher
from fleet.agent.notice import PollingWatcher, TransientError, WatcherConfigError
from fleet.agent.vast import VastWatcher

POOL = ThreadPoolExecutor(8)
RUNNING: list[Watching] = []


@pytest.fixture(autouse=True)
def _stop_watchers():
    yield
    while RUNNING:
        RUNNING.pop().stop.set()


class Watching:
    """Runs ``wait_for_notice`` in a thread so a test can act on the fake meanwhile."""

    def __init__(self, watcher: PollingWatcher):
        self.watcher = watcher
        self.stop = threading.Event()
        self.future: Future = POOL.submit(watcher.wait_for_notice, self.stop)
        RUNNING.append(self)

    def notice(self, timeout: float = 15.0):
        return self.future.result(timeout=timeout)

    def stopped(self):
        self.stop.set()
        return self.future.result(timeout=15.0)


def wait_for(condition, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.02)


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# ---- AWS IMDSv2 ----------------------------------------------------------------------------------
def aws(imds, **kw) -> AwsWatcher:
    return AwsWatcher(imds.url, interval=0.05, timeout=0.5, **kw)


def test_aws_quiet_node_polls_with_one_token_and_stops_cleanly(imds):
    w = Watching(aws(imds))
    wait_for(lambda: len(imds.seen("GET", "spot/instance-action")) >= 3)
    assert w.stopped() is None
    assert len(imds.seen("PUT", "/latest/api/token")) == 1
    tokens = {r.headers["x-aws-ec2-metadata-token"] for r in imds.seen("GET", "spot/instance-action")}
    assert (
        len(tokens) == 1
        and imds.seen("PUT", "/latest/api/token")[0].headers["x-aws-ec2-metadata-token-ttl-seconds"] == "21600"
    )


@pytest.mark.parametrize("action", ["terminate", "stop", "hibernate"])
def test_aws_instance_action_is_a_notice_with_the_vendor_deadline(imds, action):
    w = Watching(aws(imds))
    wait_for(lambda: imds.seen("GET", "spot/instance-action"))
    when = imds.schedule_action(action, in_seconds=120)
    notice = w.notice()
    assert (notice.cloud, notice.kind, notice.deadline, notice.final) == ("aws", action, when, True)
    assert notice.detail["action"] == action and "deadline_assumed" not in notice.detail


def test_aws_expired_token_is_refetched(imds):
    watcher = aws(imds)
    w = Watching(watcher)
    wait_for(lambda: imds.seen("GET", "spot/instance-action"))
    imds.expire_tokens()
    wait_for(lambda: len(imds.seen("PUT", "/latest/api/token")) >= 2)
    imds.schedule_action()
    assert w.notice().kind == "terminate"
    assert watcher.token_fetches == 2
    statuses_seen_before_refresh = [r for r in imds.seen("GET", "spot/instance-action")]
    assert len({r.headers["x-aws-ec2-metadata-token"] for r in statuses_seen_before_refresh}) == 2


def test_aws_rebalance_is_an_early_advisory_notice_reported_once(imds):
    watcher = aws(imds)
    w = Watching(watcher)
    wait_for(lambda: imds.seen("GET", "events/recommendations/rebalance"))
    imds.recommend_rebalance()
    first = w.notice()
    assert (first.kind, first.final, first.detail["deadline_assumed"]) == ("rebalance", False, True)
    assert first.detail["noticeTime"] == imds.rebalance["noticeTime"]
    again = Watching(watcher)  # the same recommendation must not fire twice
    polls = len(imds.seen("GET", "events/recommendations/rebalance"))
    wait_for(lambda: len(imds.seen("GET", "events/recommendations/rebalance")) >= polls + 3)
    assert not again.future.done()
    when = imds.schedule_action()
    final = again.notice()
    assert (final.kind, final.deadline) == ("terminate", when)


def test_aws_rebalance_can_be_ignored(imds):
    imds.recommend_rebalance()
    w = Watching(aws(imds, rebalance=False))
    wait_for(lambda: len(imds.seen("GET", "spot/instance-action")) >= 3)
    assert not w.future.done()
    assert imds.seen("GET", "events/recommendations/rebalance") == []
    imds.schedule_action()
    assert w.notice().kind == "terminate"


def test_aws_survives_5xx_timeouts_and_garbage(imds):
    watcher = aws(imds)
    watcher.max_backoff = 0.3  # keep the test short; the default caps retries at 2 s
    imds.fail_next(3, 500)
    imds.stall_next(2, 0.8)  # longer than the watcher's 0.5 s timeout
    imds.fail_next(1, 503)
    w = Watching(watcher)
    wait_for(lambda: len(imds.requests) >= 8)
    imds.schedule_action()
    assert w.notice().kind == "terminate"
    assert watcher.failures == 0  # reset once the service answered again


def test_fake_imds_speaks_imdsv2(imds):
    assert http.request("PUT", f"{imds.url}/latest/api/token").status == 400  # TTL header required
    assert http.request("GET", f"{imds.url}/latest/meta-data/spot/instance-action").status == 401
    token = http.request(
        "PUT", f"{imds.url}/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}
    ).text
    got = http.request(
        "GET", f"{imds.url}/latest/meta-data/spot/instance-action", headers={"X-aws-ec2-metadata-token": token}
    )
    assert got.status == 404


# ---- GCE -----------------------------------------------------------------------------------------
def test_gce_long_polls_with_etag_and_sees_preemption(gce):
    w = Watching(GceWatcher(gce.url, timeout_sec=5))
    wait_for(lambda: any(r.query.get("wait_for_change") for r in gce.requests))
    gce.preempt()
    notice = w.notice()
    assert (notice.cloud, notice.kind, notice.final) == ("gcp", "preempt", True)
    assert notice.detail == {"preempted": "TRUE", "deadline_assumed": True}
    first, waiting = gce.requests[0], [r for r in gce.requests if r.query.get("wait_for_change")]
    assert first.query == {} and first.headers["metadata-flavor"] == "Google"
    assert waiting[0].query["last_etag"] and waiting[0].query["timeout_sec"] == "5"
    assert len(gce.requests) == 2  # one read, one blocking wait that returned the change


def test_gce_already_preempted_is_seen_at_once(gce):
    gce.preempt()
    assert Watching(GceWatcher(gce.url)).notice().kind == "preempt"


def test_gce_honours_GCE_METADATA_HOST_and_survives_errors(gce, monkeypatch):
    monkeypatch.setenv("GCE_METADATA_HOST", gce.host)
    gce.fail_next(2, 503)
    watcher = GceWatcher(timeout_sec=1)
    w = Watching(watcher)
    wait_for(lambda: len(gce.requests) >= 3)
    gce.preempt()
    assert w.notice().kind == "preempt"
    assert watcher.url == gce.url


def test_fake_gce_requires_the_flavor_header(gce):
    assert http.request("GET", f"{gce.url}/computeMetadata/v1/instance/preempted").status == 403


# ---- Azure ---------------------------------------------------------------------------------------
def test_azure_preempt_for_this_vm_with_notbefore_deadline(azure):
    w = Watching(AzureWatcher(azure.url, interval=0.05, timeout=0.5))
    wait_for(lambda: azure.seen("GET", "/metadata/scheduledevents"))
    event_id = azure.schedule("Preempt", not_before_in=30)
    notice = w.notice()
    assert (notice.cloud, notice.kind, notice.detail["EventId"]) == ("azure", "preempt", event_id)
    assert abs(notice.deadline - (time.time() + 30)) < 3
    assert azure.seen("GET", "/metadata/instance/compute/name")  # learned its own name
    assert all(r.headers["metadata"] == "true" for r in azure.requests)


def test_azure_ignores_other_vms_and_non_eviction_events(azure):
    w = Watching(AzureWatcher(azure.url, interval=0.05))
    azure.schedule("Freeze")
    azure.schedule("Reboot")
    azure.schedule("Preempt", resources=["someone-else"])
    polls = len(azure.seen("GET", "/metadata/scheduledevents"))
    wait_for(lambda: len(azure.seen("GET", "/metadata/scheduledevents")) >= polls + 3)
    assert not w.future.done()
    azure.schedule("Terminate")
    assert w.notice().kind == "terminate"


def test_azure_acknowledge_posts_start_requests(azure):
    watcher = AzureWatcher(azure.url, vm_name="spot-vm-1", interval=0.05)
    event_id = azure.schedule("Preempt")
    notice = Watching(watcher).notice()
    assert watcher.acknowledge(notice) is True
    posts = azure.seen("POST", "/metadata/scheduledevents")
    assert json.loads(posts[0].body) == {"StartRequests": [{"EventId": event_id}]}
    assert azure.acks == [event_id] and azure.events[0]["EventStatus"] == "Started"
    assert not azure.seen("GET", "/metadata/instance/compute/name")  # name given: no lookup


def test_azure_survives_errors(azure):
    azure.fail_next(2, 500)
    azure.stall_next(1, 0.8)
    w = Watching(AzureWatcher(azure.url, interval=0.05, timeout=0.5))
    wait_for(lambda: len(azure.requests) >= 5)
    azure.schedule("Preempt")
    assert w.notice().kind == "preempt"


def test_fake_azure_requires_the_metadata_header(azure):
    assert http.request("GET", f"{azure.url}/metadata/scheduledevents?api-version=2020-07-01").status == 400


# ---- Vast ----------------------------------------------------------------------------------------
def vast_watcher(vast, instance_id="4242", **kw) -> VastWatcher:
    return VastWatcher(instance_id, api_key=vast.api_key, url=vast.url, interval=0.05, **kw)


def test_vast_outbid_detected_from_instance_state(vast):
    vast.add_instance("4242", is_bid=True)
    w = Watching(vast_watcher(vast))
    wait_for(lambda: len(vast.requests) >= 2)
    vast.outbid("4242")
    notice = w.notice()
    assert (notice.cloud, notice.kind) == ("vast", "outbid")
    assert notice.detail["cur_state"] == notice.detail["intended_status"] == notice.detail["next_state"] == "stopped"
    req = vast.requests[0]
    assert req.path == "/api/v0/instances/4242/" and req.query == {"owner": "me"}
    assert req.headers["authorization"] == f"Bearer {vast.api_key}"


@pytest.mark.parametrize("change, kind", [("begin_stop", "stopping"), ("destroy", "gone")])
def test_vast_stopping_and_gone(vast, change, kind):
    vast.add_instance("77")
    w = Watching(vast_watcher(vast, "77"))
    wait_for(lambda: vast.requests)
    getattr(vast, change)("77")
    assert w.notice().kind == kind


def test_vast_on_demand_stop_is_not_called_outbid(vast):
    vast.add_instance("78", is_bid=False)
    vast.outbid("78")
    assert Watching(vast_watcher(vast, "78")).notice().kind == "stopped"


def test_vast_refused_key_is_a_config_error(vast):
    vast.add_instance("79")
    with pytest.raises(WatcherConfigError, match="refused"):
        VastWatcher("79", api_key="wrong", url=vast.url).wait_for_notice()


def test_vast_survives_errors(vast):
    vast.add_instance("80")
    vast.fail_next(2, 502)
    vast.stall_next(1, 0.8)
    w = Watching(vast_watcher(vast, "80", timeout=0.5))
    wait_for(lambda: len(vast.requests) >= 5)
    vast.outbid("80")
    assert w.notice().kind == "outbid"


def test_vast_needs_an_instance_and_a_key(monkeypatch, tmp_path):
    for var in ("CONTAINER_ID", "VAST_API_KEY", "CONTAINER_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(WatcherConfigError, match="instance id"):
        VastWatcher()
    with pytest.raises(WatcherConfigError, match="API key"):
        VastWatcher("1")


# ---- OCI -----------------------------------------------------------------------------------------
def test_oci_gives_no_notice_but_names_the_instance(oci_imds):
    w = make_watcher("oci", WatcherOptions(url=oci_imds.url))
    assert w.poll_once() is None  # nothing on the instance announces a preemption
    assert w.instance_id() == "ocid1.instance.oc1.iad.fakenode"
    assert instance_id("oci", url=oci_imds.url) == "ocid1.instance.oc1.iad.fakenode"
    assert oci_imds.seen("GET", "/opc/v2/instance/id")[-1].headers["authorization"] == "Bearer Oracle"


def test_oci_instance_id_without_an_answer_is_transient(oci_imds):
    oci_imds.fail_next(1, 503)
    with pytest.raises(TransientError):
        make_watcher("oci", WatcherOptions(url=oci_imds.url)).instance_id()


# ---- local cloud ---------------------------------------------------------------------------------
def test_local_notice_file(tmp_path):
    path = tmp_path / "notices" / "i-1.json"
    w = Watching(LocalWatcher(path, interval=0.02))
    path.parent.mkdir()
    path.write_text('{"action": "termin')  # half-written: read again next poll
    time.sleep(0.1)
    assert not w.future.done()
    when = time.time() + 120
    path.write_text(json.dumps({"action": "terminate", "time": when}))
    notice = w.notice()
    assert (notice.cloud, notice.kind, notice.deadline) == ("local", "terminate", when)


def test_local_notice_on_a_simulated_clock_gets_the_default_window(tmp_path):
    path = tmp_path / "n.json"
    path.write_text(json.dumps({"action": "terminate", "time": 1.0e9}))  # sim clock far from now
    notice = LocalWatcher(path).wait_for_notice()
    assert notice.detail["deadline_assumed"] is True and 0 < notice.seconds_left() <= 30


def test_local_notice_prefers_the_wall_clock_deadline(tmp_path):
    path = tmp_path / "n.json"
    wall = time.time() + 2.0
    path.write_text(json.dumps({"action": "terminate", "time": 1.0e9, "wall_deadline": wall}))
    notice = LocalWatcher(path).wait_for_notice()
    assert notice.deadline == wall and "deadline_assumed" not in notice.detail


# ---- choosing the watcher ------------------------------------------------------------------------
def test_auto_detects_each_cloud_by_who_answers(monkeypatch, imds, gce, azure):
    for var in ("SPOTFLEET_NOTICE_FILE", "CONTAINER_ID"):
        monkeypatch.delenv(var, raising=False)
    dead = closed_port_url()
    cases = {
        "aws": (imds.url, dead.removeprefix("http://"), dead),
        "gcp": (dead, gce.host, dead),
        "azure": (dead, dead.removeprefix("http://"), azure.url),
    }
    for cloud, (aws_url, gce_host, azure_url) in cases.items():
        monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", aws_url)
        monkeypatch.setenv("GCE_METADATA_HOST", gce_host)
        monkeypatch.setenv("SPOTFLEET_AZURE_METADATA_URL", azure_url)
        assert detect_cloud() == cloud
        assert make_watcher("auto").cloud == cloud
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", dead)
    monkeypatch.setenv("GCE_METADATA_HOST", dead.removeprefix("http://"))
    monkeypatch.setenv("SPOTFLEET_AZURE_METADATA_URL", dead)
    with pytest.raises(WatcherConfigError, match="--cloud"):
        detect_cloud()
    monkeypatch.setenv("CONTAINER_ID", "4242")  # inside a Vast container with a key
    monkeypatch.setenv("VAST_API_KEY", "k")
    assert detect_cloud() == "vast"
    monkeypatch.setenv("SPOTFLEET_NOTICE_FILE", "/tmp/x.json")
    assert detect_cloud() == "local"


def test_unknown_cloud_names_the_choices():
    with pytest.raises(WatcherConfigError, match="aws, gcp, azure, vast, oci, local"):
        make_watcher("ibm", WatcherOptions())


def test_answers_in_an_undocumented_shape_are_retried_not_fatal(imds, azure):
    with imds._lock:
        imds.instance_action = ["not", "an", "object"]
    with azure._lock:
        azure.events = ["not-an-event"]
    aws_watch = Watching(aws(imds))
    azure_watch = Watching(AzureWatcher(azure.url, interval=0.05))
    wait_for(lambda: aws_watch.watcher.failures >= 2 and azure_watch.watcher.failures >= 2)
    with imds._lock:
        imds.instance_action = None
    with azure._lock:
        azure.events = []
    imds.schedule_action()
    azure.schedule("Preempt")
    assert aws_watch.notice().kind == "terminate" and azure_watch.notice().kind == "preempt"
