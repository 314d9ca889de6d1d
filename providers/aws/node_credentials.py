"""Scoped, revocable S3 credentials for nodes without a cloud identity (a Vast host is a third
party's machine: it must never hold the operator's own keys).

Per fleet, one IAM user ``spotfleet-nodes-<fleet>`` (path ``/spotfleet/``, tagged with the fleet,
bucket and prefix) whose only permission is its inline policy :func:`prefix_policy`: read, write
and delete the objects under ``<bucket>/<prefix>/`` and list the bucket under that prefix; and
one access key of it.

* :func:`ensure` is idempotent. IAM shows a key's secret only when the key is made, so it is kept
  where every machine that runs this fleet with the operator's credentials can read it back (a
  rerun of ``fleet up``, the rebalancer in its container) and no node can: in the fleet's own
  bucket, outside the node prefix, at :data:`KEPT_PREFIX` ``<fleet>.json`` (the bucket is private
  and encrypted; the node's policy does not reach it). A key that is no longer listed is replaced.
* :func:`revoke` deletes the key(s), the policy, the user and the kept copy; idempotent. It never
  touches a user that does not carry this fleet's tag.
"""

from __future__ import annotations

import json
from typing import Any

from fleet.errors import ProviderError
from fleet.safetext import register_secret
from providers.aws.session import Aws

USER_PATH = "/spotfleet/"
POLICY_NAME = "spotfleet-checkpoint-prefix"
#: Where the key's secret is kept in the fleet's bucket (outside every node prefix).
KEPT_PREFIX = ".spotfleet/node-credentials/"
TAG_FLEET, TAG_BUCKET, TAG_PREFIX = "spotfleet:fleet", "spotfleet:bucket", "spotfleet:prefix"
_GONE = {"NoSuchEntity", "NoSuchKey", "NoSuchBucket", "404"}


def user_name(fleet: str) -> str:
    return f"spotfleet-nodes-{fleet}"


def prefix_policy(bucket: str, prefix: str) -> dict[str, Any]:
    """The node user's only permissions: the objects under ``prefix/`` and listing that prefix."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "FleetObjects",
                "Effect": "Allow",
                "Action": [
                    "s3:GetObject",
                    "s3:PutObject",
                    "s3:DeleteObject",
                    "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts",
                ],
                "Resource": f"arn:aws:s3:::{bucket}/{prefix}/*",
            },
            {
                "Sid": "ListFleetPrefix",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{bucket}",
                "Condition": {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}},
            },
        ],
    }


def ensure(aws: Aws, *, fleet: str, bucket: str, prefix: str, region: str) -> dict[str, str]:
    """The node environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``) of the fleet's
    scoped user, made or found (see the module doc). Raises ProviderError."""
    prefix = prefix.strip("/")
    if not prefix or f"{prefix}/".startswith(KEPT_PREFIX.split("/")[0] + "/"):
        raise ProviderError(
            "aws",
            f"checkpoint.prefix {prefix!r} cannot hold scoped node credentials: name a prefix "
            f"other than '' and {KEPT_PREFIX.split('/')[0]!r} (checkpoint.prefix)",
            code="InvalidPrefix",
        )
    name = user_name(fleet)
    tags = [
        {"Key": TAG_FLEET, "Value": fleet},
        {"Key": TAG_BUCKET, "Value": bucket},
        {"Key": TAG_PREFIX, "Value": prefix},
    ]
    try:
        aws.call("iam", region, "create_user", UserName=name, Path=USER_PATH, Tags=tags)
    except ProviderError as err:
        if err.code != "EntityAlreadyExists":
            raise
        _check_owner(aws, region, name, fleet)
        aws.call("iam", region, "tag_user", UserName=name, Tags=tags)
    aws.call(
        "iam",
        region,
        "put_user_policy",
        UserName=name,
        PolicyName=POLICY_NAME,
        PolicyDocument=json.dumps(prefix_policy(bucket, prefix)),
    )
    listed = {k["AccessKeyId"] for k in aws.call("iam", region, "list_access_keys", UserName=name)["AccessKeyMetadata"]}
    kept = _read_kept(aws, region, bucket, fleet)
    if kept is not None and kept["AWS_ACCESS_KEY_ID"] in listed:
        register_secret(kept["AWS_SECRET_ACCESS_KEY"])
        return kept
    for stale in listed:  # keys whose secret is lost: nobody can use them, and IAM allows two
        aws.call("iam", region, "delete_access_key", UserName=name, AccessKeyId=stale)
    key = aws.call("iam", region, "create_access_key", UserName=name)["AccessKey"]
    env = {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
    register_secret(env["AWS_SECRET_ACCESS_KEY"])
    aws.call(
        "s3",
        region,
        "put_object",
        Bucket=bucket,
        Key=f"{KEPT_PREFIX}{fleet}.json",
        Body=json.dumps(env).encode(),
        ServerSideEncryption="AES256",
    )
    return env


def revoke(aws: Aws, *, fleet: str, region: str) -> list[str]:
    """Delete the fleet's scoped user with its keys, policy and kept secret; the names deleted."""
    name = user_name(fleet)
    try:
        tags = _check_owner(aws, region, name, fleet)
    except ProviderError as err:
        if err.code in _GONE:
            return []
        raise
    for key in aws.call("iam", region, "list_access_keys", UserName=name)["AccessKeyMetadata"]:
        _gone_ok(lambda: aws.call("iam", region, "delete_access_key", UserName=name, AccessKeyId=key["AccessKeyId"]))
    _gone_ok(lambda: aws.call("iam", region, "delete_user_policy", UserName=name, PolicyName=POLICY_NAME))
    if tags.get(TAG_BUCKET):
        _gone_ok(
            lambda: aws.call("s3", region, "delete_object", Bucket=tags[TAG_BUCKET], Key=f"{KEPT_PREFIX}{fleet}.json")
        )
    _gone_ok(lambda: aws.call("iam", region, "delete_user", UserName=name))
    return [f"iam user {name}"]


def _check_owner(aws: Aws, region: str, name: str, fleet: str) -> dict[str, str]:
    """The user's tags; ProviderError when it is not this fleet's (never touch what we did not make)."""
    user = aws.call("iam", region, "get_user", UserName=name)["User"]
    tags = {t["Key"]: t["Value"] for t in aws.call("iam", region, "list_user_tags", UserName=name)["Tags"]}
    if tags.get(TAG_FLEET) != fleet or user.get("Path") != USER_PATH:
        raise ProviderError(
            "aws",
            f"IAM user {name} exists but was not made by spotfleet for fleet {fleet!r}; "
            "rename the fleet or remove that user",
            region=region,
            code="ForeignUser",
        )
    return tags


def _read_kept(aws: Aws, region: str, bucket: str, fleet: str) -> dict[str, str] | None:
    try:
        body = aws.call("s3", region, "get_object", Bucket=bucket, Key=f"{KEPT_PREFIX}{fleet}.json")["Body"].read()
    except ProviderError as err:
        if err.code in _GONE:
            return None
        raise
    try:
        data = json.loads(body)
        return {k: str(data[k]) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    except (ValueError, KeyError, TypeError):
        return None  # unreadable: a new key replaces it


def _gone_ok(call) -> None:
    try:
        call()
    except ProviderError as err:
        if err.code not in _GONE:
            raise
