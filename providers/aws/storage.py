"""The S3 checkpoint bucket and the role nodes use to reach it; idempotent.

``ensure(aws, spec, fleet_tags)`` makes (or finds) the bucket with public access blocked,
default encryption (SSE-S3), a lifecycle rule (abort incomplete multipart uploads after a day;
expire objects after ``expire_days`` when set) and tags; then an IAM role and instance profile
of the same name (``spotfleet-<bucket>``) whose only permissions are that bucket's objects.
Launches attach that profile (``providers.aws.launch.instance_profile_for``).
"""

from __future__ import annotations

import json
import re

from fleet.errors import ProviderError
from providers.aws.launch import profile_name
from providers.aws.session import Aws
from providers.base import BucketRef, StorageSpec

_BUCKET = re.compile(r"^(?!xn--)(?!.*\.\.)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
TAGS = {"spotfleet:purpose": "checkpoints"}
ASSUME_EC2 = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


def bucket_policy(bucket: str) -> dict:
    """What a node may do: list the bucket, read, write and delete its objects; nothing else."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
                "Resource": f"arn:aws:s3:::{bucket}",
            },
            {
                "Effect": "Allow",
                "Action": [
                    "s3:GetObject",
                    "s3:PutObject",
                    "s3:DeleteObject",
                    "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts",
                ],
                "Resource": f"arn:aws:s3:::{bucket}/*",
            },
        ],
    }


def ensure(aws: Aws, spec: StorageSpec) -> BucketRef:
    """The ready bucket (see the module doc); raises ProviderError naming a bad bucket name."""
    bucket = spec.bucket
    if not _BUCKET.match(bucket):
        raise ProviderError(
            "aws",
            f"checkpoint bucket name {bucket!r} is not a valid S3 name: use 3-63 lowercase "
            "letters, digits, dots and dashes (checkpoint.bucket)",
            code="InvalidBucketName",
        )
    region = spec.region or aws.default_region
    _bucket(aws, region, bucket)
    aws.call(
        "s3",
        region,
        "put_public_access_block",
        Bucket=bucket,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    aws.call(
        "s3",
        region,
        "put_bucket_encryption",
        Bucket=bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
    )
    rule = {
        "ID": "spotfleet",
        "Status": "Enabled",
        "Filter": {"Prefix": ""},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
    }
    if spec.expire_days:
        rule["Expiration"] = {"Days": spec.expire_days}
    aws.call(
        "s3", region, "put_bucket_lifecycle_configuration", Bucket=bucket, LifecycleConfiguration={"Rules": [rule]}
    )
    aws.call(
        "s3",
        region,
        "put_bucket_tagging",
        Bucket=bucket,
        Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in TAGS.items()]},
    )
    _node_role(aws, region, bucket)
    return BucketRef(provider="aws", bucket=bucket, uri=f"s3://{bucket}", region=region)


def _bucket(aws: Aws, region: str, bucket: str) -> None:
    params: dict = {"Bucket": bucket}
    if region != "us-east-1":
        params["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        aws.call("s3", region, "create_bucket", **params)
    except ProviderError as err:
        if err.code == "BucketAlreadyOwnedByYou":
            return
        if err.code == "BucketAlreadyExists":
            raise ProviderError(
                "aws",
                f"bucket {bucket!r} belongs to another account; choose another checkpoint.bucket",
                region=region,
                code=err.code,
            ) from None
        raise


def _node_role(aws: Aws, region: str, bucket: str) -> None:
    name = profile_name(bucket)
    tags = [{"Key": k, "Value": v} for k, v in TAGS.items()]
    _exists_ok(
        lambda: aws.call(
            "iam", region, "create_role", RoleName=name, Tags=tags, AssumeRolePolicyDocument=json.dumps(ASSUME_EC2)
        )
    )
    aws.call(
        "iam",
        region,
        "put_role_policy",
        RoleName=name,
        PolicyName="spotfleet-checkpoints",
        PolicyDocument=json.dumps(bucket_policy(bucket)),
    )
    _exists_ok(lambda: aws.call("iam", region, "create_instance_profile", InstanceProfileName=name, Tags=tags))
    profile = aws.call("iam", region, "get_instance_profile", InstanceProfileName=name)["InstanceProfile"]
    if not any(r["RoleName"] == name for r in profile.get("Roles", [])):
        aws.call("iam", region, "add_role_to_instance_profile", InstanceProfileName=name, RoleName=name)


def _exists_ok(create) -> None:
    try:
        create()
    except ProviderError as err:
        if err.code != "EntityAlreadyExists":
            raise
