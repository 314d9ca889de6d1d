"""`fleet up / status / down` on `backend: cloud` with AWS: the real CLI as a subprocess, boto3 over
HTTP to moto behind the EC2 fault proxy (spot prices set per zone there, since moto's are one
constant). What counts is what EC2 holds: instances by fleet tag, in any state. What only AWS has;
the lifecycle every provider shares (up, rerun, kill -9 mid-up, down) is
tests/cli/test_provider_lifecycle.py, in ``AwsLifecycle`` (tests/cli/aws_cli_world.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

import aws_world  # noqa: E402
from cli.aws_cli_world import FLEET_BIN, REGION, AwsCli, pool_of  # noqa: E402


def test_a_pool_out_of_capacity_is_replanned_to_another(aws_cli: AwsCli):
    aws_cli.world.proxy.capacity("g4dn.xlarge", 0, aws_cli.world.subnets(REGION, "use1-az1"))  # us-east-1b is empty
    report = aws_cli.fleet_json("up", aws_cli.spec(), "--yes")
    assert report["ok"]
    assert report["counts"] == {pool_of("us-east-1c"): 2, pool_of("us-east-1d"): 2}
    assert [f["error_code"] for f in report["failures"]] == ["InsufficientInstanceCapacity"]
    assert aws_cli.alive_by_pool("awsfleet") == report["counts"]


def test_a_spot_instance_aws_took_back_is_dated_by_aws(aws_cli: AwsCli):
    from fleet.state import open_store

    spec = aws_cli.spec()
    aws_cli.fleet_json("up", spec, "--yes")
    victim = sorted(i["InstanceId"] for i in aws_cli.ec2_instances("awsfleet"))[0]
    time.sleep(2.5)
    aws_cli.world.direct("ec2", REGION).terminate_instances(InstanceIds=[victim])
    taken_at = float(int(time.time()) - 1)
    aws_cli.world.proxy.interrupted([victim], taken_at)  # EC2 now describes it as a spot interruption
    status = aws_cli.fleet_json("status", "awsfleet", "--check", ok=(3,))  # one short of its plan: --check exits 3
    assert status["reconciled"] and status["status"] == "short"
    store = open_store(str(aws_cli.root / "home" / "state.db"), create=False)
    try:
        [record] = [r for r in store.instances("awsfleet") if r.id == victim]
    finally:
        store.close()
    assert record.end_reason == "preempted" and record.ended_at == taken_at


def test_watch_replaces_a_node_at_once_when_its_interruption_notice_reaches_the_queue(aws_cli: AwsCli):
    """``rebalance.interruption_queue``: ``fleet up`` makes the queue and rules, the watcher reads
    the EventBridge notice (routed by moto from ``PutEvents``) and replaces the node in its next
    pass (``--every 1h``: only news starts one), a foreign notice is ignored, and ``fleet down``
    deletes the queue and rules."""
    spec = aws_cli.spec()
    Path(spec).write_text(Path(spec).read_text() + "rebalance:\n  interruption_queue: true\n")
    aws_cli.fleet_json("up", spec, "--yes")
    sqs, events = aws_cli.world.direct("sqs", REGION), aws_cli.world.direct("events", REGION)
    assert sqs.get_queue_url(QueueName="spotfleet-awsfleet-interruptions")["QueueUrl"]
    assert len(events.list_rules(NamePrefix="spotfleet-awsfleet-")["Rules"]) == 3
    ours = sorted(i["InstanceId"] for i in aws_cli.ec2_instances("awsfleet"))
    theirs = aws_cli.world.direct("ec2", REGION).run_instances(
        ImageId=aws_world.MOTO_AMI, InstanceType="g4dn.xlarge", MinCount=1, MaxCount=1
    )["Instances"][0]["InstanceId"]
    proc = subprocess.Popen(
        [FLEET_BIN, "rebalance", "awsfleet", "--watch", "1s", "--every", "1h", "--passes", "2"],
        env=aws_cli.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "nothing to do" in first, first
        events.put_events(
            Entries=[
                {
                    "Source": "aws.ec2",
                    "DetailType": "EC2 Spot Instance Interruption Warning",
                    "Detail": json.dumps({"instance-id": iid, "instance-action": "terminate"}),
                    "Resources": [f"arn:aws:ec2:{REGION}:123456789012:instance/{iid}"],
                }
                for iid in (theirs, ours[0])
            ]
        )
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "early-replace" in out and ": done" in out, out
    assert sum(aws_cli.alive_by_pool("awsfleet").values()) == 5  # 4 healthy and the one AWS is about to take
    history = aws_cli.fleet_json("history", "awsfleet")
    noticed = [e for e in history["events"] if e["kind"] == "interruption-notice"]
    assert [(e["instance_id"], e["detail"]["source"]) for e in noticed] == [(ours[0], "queue")]
    assert aws_cli.fleet("down", "awsfleet", "--yes").returncode == 0
    assert events.list_rules(NamePrefix="spotfleet-awsfleet-")["Rules"] == []
    assert sqs.list_queues(QueueNamePrefix="spotfleet-awsfleet").get("QueueUrls", []) == []
