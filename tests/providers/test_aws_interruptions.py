"""The AWS interruption queue on moto: EventBridge rules route EC2's documented events into the
fleet's SQS queue (moto routes ``PutEvents`` on the default bus to SQS targets), the adapter
reads only its fleet's notices, deletes what it read, skips malformed bodies, and ``teardown``
removes only what carries the fleet's tag."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet.errors import ProviderError
from fleet.model import TAG_FLEET
from providers.aws import interruptions
from providers.aws.provider import AwsProvider
from providers.aws.settings import AwsSettings
from providers.base import ReportsInterruptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))

import aws_world  # noqa: E402

REGION = "us-east-1"
FLEET = "qfleet"


@pytest.fixture()
def world() -> Iterator[aws_world.AwsWorld]:
    w = aws_world.fresh()
    with w.environment():
        yield w


def _provider(on: bool = True) -> AwsProvider:
    return AwsProvider(AwsSettings(regions=[REGION]), interruption_queue=on)


def _run(world: aws_world.AwsWorld, fleet: str | None) -> str:
    tags = [{"ResourceType": "instance", "Tags": [{"Key": TAG_FLEET, "Value": fleet}]}] if fleet else []
    got = world.direct("ec2", REGION).run_instances(
        ImageId=aws_world.MOTO_AMI, InstanceType="g4dn.xlarge", MinCount=1, MaxCount=1, TagSpecifications=tags
    )
    return str(got["Instances"][0]["InstanceId"])


def _event(detail_type: str, detail: dict[str, Any]) -> dict[str, Any]:
    """An entry of PutEvents shaped as EC2 sends it (source aws.ec2, the instance's ARN)."""
    return {
        "Source": "aws.ec2",
        "DetailType": detail_type,
        "Detail": json.dumps(detail),
        "Resources": [f"arn:aws:ec2:{REGION}:123456789012:instance/{detail['instance-id']}"],
    }


def _queue_url(world: aws_world.AwsWorld, fleet: str = FLEET) -> str:
    return str(world.direct("sqs", REGION).get_queue_url(QueueName=interruptions.queue_name(fleet))["QueueUrl"])


def test_the_queue_and_its_rules_are_tagged_and_only_eventbridge_from_them_may_send(world: aws_world.AwsWorld):
    provider = _provider()
    assert isinstance(provider, ReportsInterruptions)
    assert provider.poll_interruptions(FLEET, [REGION], 0) == []  # made on first use
    url = _queue_url(world)
    sqs, events = world.direct("sqs", REGION), world.direct("events", REGION)
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {TAG_FLEET: FLEET}
    rules = {r["Name"]: r for r in events.list_rules(NamePrefix=f"spotfleet-{FLEET}-")["Rules"]}
    assert sorted(rules) == [f"spotfleet-{FLEET}-{k}" for k in ("rebalance", "spot", "state")]
    assert {json.loads(r["EventPattern"])["detail-type"][0] for r in rules.values()} == {
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
    }
    for r in rules.values():
        assert events.list_tags_for_resource(ResourceARN=r["Arn"])["Tags"] == [{"Key": TAG_FLEET, "Value": FLEET}]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy", "QueueArn"])["Attributes"]
    [statement] = json.loads(attrs["Policy"])["Statement"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert statement["Action"] == "sqs:SendMessage" and statement["Resource"] == attrs["QueueArn"]
    assert sorted(statement["Condition"]["ArnEquals"]["aws:SourceArn"]) == sorted(r["Arn"] for r in rules.values())
    # a second process finds and refreshes the same queue and rules
    assert interruptions.ensure(provider.aws, REGION, FLEET) == url
    assert len(events.list_rules(NamePrefix=f"spotfleet-{FLEET}-")["Rules"]) == 3


def test_only_this_fleets_notices_come_back_and_every_message_read_is_deleted(
    world: aws_world.AwsWorld, caplog: pytest.LogCaptureFixture
):
    provider = _provider()
    provider.poll_interruptions(FLEET, [REGION], 0)
    ours, other_fleet, untagged = _run(world, FLEET), _run(world, "otherfleet"), _run(world, None)
    events = world.direct("events", REGION)
    put = events.put_events(
        Entries=[
            _event("EC2 Spot Instance Interruption Warning", {"instance-id": ours, "instance-action": "terminate"}),
            _event("EC2 Instance Rebalance Recommendation", {"instance-id": ours}),
            _event("EC2 Spot Instance Interruption Warning", {"instance-id": other_fleet, "instance-action": "stop"}),
            _event("EC2 Spot Instance Interruption Warning", {"instance-id": untagged, "instance-action": "terminate"}),
            _event("EC2 Instance State-change Notification", {"instance-id": ours, "state": "running"}),  # not routed
        ]
    )
    assert put["FailedEntryCount"] == 0
    sqs = world.direct("sqs", REGION)
    url = _queue_url(world)
    sqs.send_message(QueueUrl=url, MessageBody="<html>not an event</html>")
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps({"detail-type": "EC2 Instance Rebalance Recommendation", "detail": {"instance-id": 7}}),
    )
    caplog.set_level(logging.ERROR, logger="providers.aws.interruptions")
    got: list[Any] = []
    for _ in range(5):  # 10 messages a receive at most; the queue holds 6
        got += provider.poll_interruptions(FLEET, [REGION], 1)
        if not sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0, VisibilityTimeout=0).get("Messages"):
            break
    assert sorted((n.instance_id, n.kind, n.region) for n in got) == [
        (ours, "rebalance", REGION),
        (ours, "terminate", REGION),
    ]
    assert all(n.at > 0 for n in got)
    assert "not JSON" in caplog.text and "no instance-id" in caplog.text
    assert (
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"][
            "ApproximateNumberOfMessages"
        ]
        == "0"
    )


def test_an_ending_is_news_and_a_fleet_without_the_queue_makes_none(world: aws_world.AwsWorld):
    provider = _provider()
    provider.poll_interruptions(FLEET, [REGION], 0)
    ours = _run(world, FLEET)
    world.direct("events", REGION).put_events(
        Entries=[_event("EC2 Instance State-change Notification", {"instance-id": ours, "state": "shutting-down"})]
    )
    got = provider.poll_interruptions(FLEET, [REGION], 1)
    assert [(n.instance_id, n.kind) for n in got] == [(ours, "ended")]
    off = _provider(on=False)
    assert off.poll_interruptions("plainfleet", [REGION], 0) == []
    names = world.direct("sqs", REGION).list_queues(QueueNamePrefix="spotfleet-plainfleet").get("QueueUrls", [])
    assert names == []


def test_teardown_deletes_the_fleets_queue_and_rules_only_and_is_idempotent(world: aws_world.AwsWorld):
    provider = _provider()
    provider.poll_interruptions(FLEET, [REGION], 0)
    provider.poll_interruptions("qfleet-b", [REGION], 0)  # a fleet whose names start like ours
    gone = provider.teardown(FLEET)
    assert sorted(gone) == sorted(
        [interruptions.queue_name(FLEET), *(interruptions.rule_name(FLEET, k) for k in ("spot", "rebalance", "state"))]
    )
    events, sqs = world.direct("events", REGION), world.direct("sqs", REGION)
    left = sorted(r["Name"] for r in events.list_rules(NamePrefix="spotfleet-")["Rules"])
    assert left == [f"spotfleet-qfleet-b-{k}" for k in ("rebalance", "spot", "state")]
    assert [u.rsplit("/", 1)[1] for u in sqs.list_queues(QueueNamePrefix="spotfleet-").get("QueueUrls", [])] == [
        interruptions.queue_name("qfleet-b")
    ]
    assert provider.teardown(FLEET) == []


def test_a_queue_of_that_name_the_fleet_did_not_make_is_refused_and_kept(world: aws_world.AwsWorld):
    sqs = world.direct("sqs", REGION)
    url = sqs.create_queue(
        QueueName=interruptions.queue_name(FLEET),
        Attributes={"MessageRetentionPeriod": str(interruptions.RETENTION_SECONDS)},
    )["QueueUrl"]
    provider = _provider()
    with pytest.raises(ProviderError, match="did not make it"):
        provider.poll_interruptions(FLEET, [REGION], 0)
    assert provider.teardown(FLEET) == []
    assert sqs.get_queue_url(QueueName=interruptions.queue_name(FLEET))["QueueUrl"] == url


@pytest.mark.parametrize(
    "body, why",
    [
        (None, "no body"),
        ("{", "not JSON"),
        ("[]", "detail object"),
        (
            json.dumps(
                {
                    "detail-type": "EC2 Spot Instance Interruption Warning",
                    "detail": {"instance-id": "i-0123456789abcdef0", "instance-action": "explode"},
                }
            ),
            "instance-action",
        ),
        (
            json.dumps({"detail-type": "Something Else", "detail": {"instance-id": "i-0123456789abcdef0"}}),
            "detail-type",
        ),
        (
            json.dumps(
                {
                    "detail-type": "EC2 Instance State-change Notification",
                    "detail": {"instance-id": "i-0123456789abcdef0", "state": "running"},
                }
            ),
            "not an ending",
        ),
    ],
)
def test_a_body_that_is_no_documented_notice_is_a_value_error(body: object, why: str):
    with pytest.raises(ValueError, match=why):
        interruptions.parse(body)


def test_the_documented_spot_warning_parses():
    """The example event of the EC2 user guide (Spot Instance interruption notices)."""
    body = json.dumps(
        {
            "version": "0",
            "id": "12345678-1234-1234-1234-123456789012",
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "account": "123456789012",
            "time": "2026-01-02T03:04:05Z",
            "region": "us-east-2",
            "resources": ["arn:aws:ec2:us-east-2:123456789012:instance/i-1234567890abcdef0"],
            "detail": {"instance-id": "i-1234567890abcdef0", "instance-action": "hibernate"},
        }
    )
    n = interruptions.parse(body)
    assert (n.instance_id, n.kind, n.region, n.at) == ("i-1234567890abcdef0", "hibernate", "us-east-2", 1767323045.0)


def test_drain_records_each_notice_of_an_alive_node_once(world: aws_world.AwsWorld, tmp_path: Path):
    """``fleet.rebalance.notices.drain`` over the real adapter: a notice becomes one
    ``interruption-notice`` event (sent twice, recorded once), an ending is news without a record."""
    from fleet.model import Instance, InstanceState, Market, PoolKey
    from fleet.rebalance.notices import drain
    from fleet.state import EventKind, open_store

    provider = _provider()
    ours, gone = _run(world, FLEET), _run(world, FLEET)
    pool = PoolKey(provider="aws", region=REGION, zone="use1-az1", instance_type="g4dn.xlarge", market=Market.SPOT)
    alive = [
        Instance(
            id=ours,
            fleet=FLEET,
            pool=pool,
            accelerator="T4",
            gpus=1,
            price_per_hour=0.2,
            state=InstanceState.RUNNING,
            launched_at=0.0,
        )
    ]
    store = open_store(str(tmp_path / "state.db"))
    provider.poll_interruptions(FLEET, [REGION], 0)
    warning = _event("EC2 Spot Instance Interruption Warning", {"instance-id": ours, "instance-action": "terminate"})
    world.direct("events", REGION).put_events(
        Entries=[
            warning,
            warning,
            _event("EC2 Instance State-change Notification", {"instance-id": gone, "state": "terminated"}),
        ]
    )
    got = drain(FLEET, {"aws": provider}, alive, store, 1)
    assert (got.recorded, got.news, got.errors) == (1, 3, {})
    [notice] = store.events(FLEET, kinds=[EventKind.NOTICE])
    assert (notice.instance_id, notice.pool, notice.detail["kind"], notice.detail["source"]) == (
        ours,
        pool.id,
        "terminate",
        "queue",
    )
