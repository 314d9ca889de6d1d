"""The fleet's EC2 interruption queue (Karpenter's pattern): EventBridge rules into one SQS queue per region.

EC2 announces a spot interruption two minutes ahead, a rebalance recommendation (elevated risk)
earlier still, and every state change, as EventBridge events on the region's default bus. A
fleet that opts in (``rebalance.interruption_queue``) gets, in each region it launches into:

* the queue ``spotfleet-<fleet>-interruptions`` (tagged ``spotfleet:fleet``; messages kept 5
  minutes: a notice older than that is past its use), whose policy lets only
  ``events.amazonaws.com`` send, and only from the three rules below (``aws:SourceArn``);
* the rules ``spotfleet-<fleet>-spot``, ``-rebalance`` and ``-state`` (tagged the same way),
  matching ``EC2 Spot Instance Interruption Warning``, ``EC2 Instance Rebalance Recommendation``
  and ``EC2 Instance State-change Notification`` (stopping, stopped, shutting-down, terminated),
  each targeting the queue.

:func:`ensure` makes them (idempotent: a rerun finds and refreshes what it made; a queue or rule of
that name without the fleet's tag is refused, never adopted). :func:`poll` long-polls the queue
and returns the notices for instances carrying the fleet's tag (the rules see every instance of
the account, so others' notices arrive too: they are dropped). Every message read is deleted,
handled or not: nobody else reads this queue, so one left would only come back. A body that is
not a documented event (not JSON, wrong types, an unknown ``detail-type``, no instance id) is
logged as an error, deleted and skipped, never a crash. :func:`remove` deletes the rules (their
targets first) and the queue, only those tagged with the fleet; what is already gone is success.

Event formats (the body EventBridge sends to an SQS target is the event JSON itself):

* EC2 Spot Instance Interruption Warning, ``detail``: ``instance-id``, ``instance-action``
  (``terminate``, ``stop`` or ``hibernate``):
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html#ec2-spot-instance-interruption-warning-event
* EC2 Instance Rebalance Recommendation, ``detail``: ``instance-id``:
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/rebalance-recommendations.html#monitor-rebalance-recommendations
* EC2 Instance State-change Notification, ``detail``: ``instance-id``, ``state``:
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitoring-instance-state-changes.html
* the queue policy an SQS target needs:
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sqs-permissions
"""

from __future__ import annotations

import json
import logging
import re
from calendar import timegm
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from fleet.errors import ProviderError
from fleet.model import TAG_FLEET
from fleet.safetext import safe
from providers.aws.session import Aws
from providers.base import Interruption

log = logging.getLogger(__name__)

SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
#: rule name suffix -> the event pattern it matches
PATTERNS: dict[str, dict[str, Any]] = {
    "spot": {"source": ["aws.ec2"], "detail-type": [SPOT_WARNING]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": [REBALANCE]},
    "state": {
        "source": ["aws.ec2"],
        "detail-type": [STATE_CHANGE],
        "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]},
    },
}
ENDED_STATES = frozenset(PATTERNS["state"]["detail"]["state"])
SPOT_ACTIONS = frozenset({"terminate", "stop", "hibernate"})
RETENTION_SECONDS = 300
TARGET_ID = "spotfleet-queue"
_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


def queue_name(fleet: str) -> str:
    return f"spotfleet-{fleet}-interruptions"


def rule_name(fleet: str, kind: str) -> str:
    return f"spotfleet-{fleet}-{kind}"


class NotOursError(ProviderError):
    """A queue or rule with the fleet's name exists but does not carry its tag."""


def ensure(aws: Aws, region: str, fleet: str) -> str:
    """The queue and rules of ``fleet`` in ``region``, made or refreshed; the queue's URL."""
    url = _queue_url(aws, region, fleet)  # looked at first: CreateQueue may tag a queue it did not make
    if not url:
        url = aws.call(
            "sqs",
            region,
            "create_queue",
            QueueName=queue_name(fleet),
            Attributes={"MessageRetentionPeriod": str(RETENTION_SECONDS)},
            tags={TAG_FLEET: fleet},
        )["QueueUrl"]
    if _queue_tags(aws, region, url).get(TAG_FLEET) != fleet:
        raise NotOursError(
            "aws",
            f"queue {queue_name(fleet)} exists but fleet {fleet} did not make it (no "
            f"{TAG_FLEET}={fleet} tag); delete or rename it",
            region=region,
            code="NotOurs",
        )
    arn = aws.call("sqs", region, "get_queue_attributes", QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    rules = []
    for kind, pattern in PATTERNS.items():
        name = rule_name(fleet, kind)
        existing = _rule_arn(aws, region, name)
        if existing and _rule_tags(aws, region, existing).get(TAG_FLEET) != fleet:
            raise NotOursError(
                "aws",
                f"EventBridge rule {name} exists but fleet {fleet} did not make it; delete or rename it",
                region=region,
                code="NotOurs",
            )
        rules.append(
            aws.call(
                "events",
                region,
                "put_rule",
                Name=name,
                EventPattern=json.dumps(pattern),
                State="ENABLED",
                Description=f"spotfleet {fleet}: EC2 notices into {queue_name(fleet)}",
                Tags=[{"Key": TAG_FLEET, "Value": fleet}],
            )["RuleArn"]
        )
    aws.call("sqs", region, "set_queue_attributes", QueueUrl=url, Attributes={"Policy": json.dumps(policy(arn, rules))})
    for kind in PATTERNS:
        aws.call("events", region, "put_targets", Rule=rule_name(fleet, kind), Targets=[{"Id": TARGET_ID, "Arn": arn}])
    return url


def policy(queue_arn: str, rule_arns: Sequence[str]) -> dict[str, Any]:
    """The queue policy: EventBridge may send, from these rules only."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "EventBridgeSendsEc2Notices",
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": list(rule_arns)}},
            }
        ],
    }


def poll(aws: Aws, region: str, fleet: str, url: str, wait_seconds: int) -> list[Interruption]:
    """One long poll (up to ``wait_seconds``, 0-20) of the queue at ``url``; see the module doc.
    Raises ProviderError when the queue or EC2 cannot be read (nothing is deleted then)."""
    got = aws.call(
        "sqs",
        region,
        "receive_message",
        QueueUrl=url,
        MaxNumberOfMessages=10,
        WaitTimeSeconds=max(0, min(20, int(wait_seconds))),
    )
    messages = got.get("Messages") or []
    if not isinstance(messages, list):
        raise ProviderError("aws", "ReceiveMessage: Messages is not a list", region=region, code="Malformed")
    notices: list[Interruption] = []
    handles: list[str] = []
    for m in messages:
        handle = m.get("ReceiptHandle") if isinstance(m, dict) else None
        if isinstance(handle, str) and handle:
            handles.append(handle)
        try:
            notices.append(parse(m.get("Body") if isinstance(m, dict) else None, region))
        except ValueError as err:
            log.error(
                "aws/%s: interruption queue %s: skipped a message that is not an EC2 notice: %s",
                region,
                queue_name(fleet),
                safe(str(err))[:300],
            )
    ours = _ours(aws, region, fleet, sorted({n.instance_id for n in notices}))
    _delete(aws, region, url, handles)
    return [n for n in notices if n.instance_id in ours]


def parse(body: object, region: str = "") -> Interruption:
    """One message body as an :class:`Interruption`; ValueError when it is not a documented EC2 notice."""
    if not isinstance(body, str):
        raise ValueError("the message has no body")
    try:
        event = json.loads(body)
    except ValueError:
        raise ValueError(f"the body is not JSON: {body[:80]!r}") from None
    if not isinstance(event, dict) or not isinstance(event.get("detail"), dict):
        raise ValueError("the body is not an EventBridge event with a detail object")
    kind_of, detail = event.get("detail-type"), event["detail"]
    instance = detail.get("instance-id")
    if not isinstance(instance, str) or not _ID.match(instance):
        raise ValueError(f"{kind_of!r}: no instance-id in the detail")
    if kind_of == SPOT_WARNING:
        kind = detail.get("instance-action")
        if kind not in SPOT_ACTIONS:
            raise ValueError(f"{SPOT_WARNING}: instance-action {str(kind)[:40]!r} is none of {sorted(SPOT_ACTIONS)}")
    elif kind_of == REBALANCE:
        kind = "rebalance"
    elif kind_of == STATE_CHANGE:
        if detail.get("state") not in ENDED_STATES:
            raise ValueError(f"{STATE_CHANGE}: state {str(detail.get('state'))[:40]!r} is not an ending")
        kind = "ended"
    else:
        raise ValueError(f"detail-type {str(kind_of)[:80]!r} is not one this queue's rules send")
    return Interruption(
        instance_id=instance, kind=str(kind), at=_epoch(event.get("time")), region=str(event.get("region") or region)
    )


def remove(aws: Aws, region: str, fleet: str) -> list[str]:
    """Delete ``fleet``'s rules and queue in ``region`` (only those tagged with it); their names."""
    gone: list[str] = []
    for kind in PATTERNS:
        name = rule_name(fleet, kind)
        arn = _rule_arn(aws, region, name)
        if not arn or _rule_tags(aws, region, arn).get(TAG_FLEET) != fleet:
            continue
        _quiet_missing(aws, "events", region, "remove_targets", Rule=name, Ids=[TARGET_ID])
        _quiet_missing(aws, "events", region, "delete_rule", Name=name)
        gone.append(name)
    url = _queue_url(aws, region, fleet)
    if url and _queue_tags(aws, region, url).get(TAG_FLEET) == fleet:
        _quiet_missing(aws, "sqs", region, "delete_queue", QueueUrl=url)
        gone.append(queue_name(fleet))
    return gone


# ---- pieces ------------------------------------------------------------------------------
def _missing(err: ProviderError) -> bool:
    return "NonExistentQueue" in err.code or "QueueDoesNotExist" in err.code or err.code == "ResourceNotFoundException"


def _quiet_missing(aws: Aws, service: str, region: str, operation: str, **params: Any) -> None:
    """``aws.call``, where a queue or rule that is already gone is success."""
    try:
        aws.call(service, region, operation, **params)
    except ProviderError as err:
        if not _missing(err):
            raise


def _queue_url(aws: Aws, region: str, fleet: str) -> str:
    try:
        return str(aws.call("sqs", region, "get_queue_url", QueueName=queue_name(fleet))["QueueUrl"])
    except ProviderError as err:
        if _missing(err):
            return ""
        raise


def _queue_tags(aws: Aws, region: str, url: str) -> dict[str, str]:
    tags = aws.call("sqs", region, "list_queue_tags", QueueUrl=url).get("Tags") or {}
    return tags if isinstance(tags, dict) else {}


def _rule_arn(aws: Aws, region: str, name: str) -> str:
    rules = aws.call("events", region, "list_rules", NamePrefix=name).get("Rules") or []
    return next((str(r.get("Arn")) for r in rules if isinstance(r, dict) and r.get("Name") == name), "")


def _rule_tags(aws: Aws, region: str, arn: str) -> dict[str, str]:
    tags = aws.call("events", region, "list_tags_for_resource", ResourceARN=arn).get("Tags") or []
    return {t["Key"]: t["Value"] for t in tags if isinstance(t, dict) and "Key" in t and "Value" in t}


def _ours(aws: Aws, region: str, fleet: str, ids: list[str]) -> set[str]:
    """Which of ``ids`` carry ``fleet``'s tag (EC2 keeps ended instances listed for a while)."""
    if not ids:
        return set()
    found = aws.pages(
        "ec2",
        region,
        "describe_instances",
        "Reservations",
        Filters=[{"Name": "instance-id", "Values": ids}, {"Name": f"tag:{TAG_FLEET}", "Values": [fleet]}],
    )
    out = set()
    for reservation in found:
        for inst in reservation.get("Instances") or [] if isinstance(reservation, dict) else []:
            tags = {t.get("Key"): t.get("Value") for t in inst.get("Tags") or [] if isinstance(t, dict)}
            if tags.get(TAG_FLEET) == fleet and inst.get("InstanceId") in ids:
                out.add(inst["InstanceId"])
    return out


def _delete(aws: Aws, region: str, url: str, handles: list[str]) -> None:
    for start in range(0, len(handles), 10):
        batch = handles[start : start + 10]
        aws.call(
            "sqs",
            region,
            "delete_message_batch",
            QueueUrl=url,
            Entries=[{"Id": str(n), "ReceiptHandle": h} for n, h in enumerate(batch)],
        )


def _epoch(text: object) -> float:
    """An event's ``time`` (``2026-01-01T00:00:00Z``) in epoch seconds; 0 when it has none."""
    if not isinstance(text, str):
        return 0.0
    try:
        return float(timegm(datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").timetuple()))
    except ValueError:
        return 0.0
