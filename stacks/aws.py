"""AWS part of a SpotFleet: launch templates, EC2 Fleets, the checkpoint bucket and the node role.

Per planned pool a launch template with the shared bootstrap as user data and the fleet tags on
instances and volumes. Per region two EC2 Fleets of type ``maintain`` whose launch template
configs are that region's pools (instance type, zone, subnet, weight = weighted GPUs per
instance): one for spot pools (``spot`` target, the spec's allocation strategy; its counts
belong to the rebalancer, see ``stacks.ownership``) and one for the on-demand baseline
(``on-demand`` target, owned by Pulumi). Capacity is in weighted GPUs.

With ``checkpoint.provider: s3``: a bucket (protected, retained on delete) with a public access
block, default encryption and a lifecycle; an IAM role and instance profile whose policy
reaches only ``bucket/prefix``. Nodes get the profile either way.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from fleet.errors import FleetError
from fleet.spec import FleetSpec, Strategy
from stacks.layout import PoolPlan, by_region, weighted_target
from stacks.ownership import ignore_changes

FLEET_TYPE = "aws:ec2/fleet:Fleet"
#: Spec strategy -> EC2 Fleet spot allocation strategy.
#: The AMI when ``providers.aws.ami`` is empty: the Deep Learning Base AMI, resolved at launch.
DEFAULT_AMI = "resolve:ssm:/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
SPOT_STRATEGY = {
    Strategy.PRICE_CAPACITY_OPTIMIZED: "price-capacity-optimized",
    Strategy.LOWEST_PRICE: "lowest-price",
    Strategy.CAPACITY_OPTIMIZED: "capacity-optimized",
    Strategy.DIVERSIFIED: "diversified",
}


class AwsFleet(pulumi.ComponentResource):
    """The AWS pools of a plan. Outputs: ``fleet_ids`` (name -> EC2 Fleet id), ``bucket_uri``."""

    def __init__(self, name: str, spec: FleetSpec, pools: list[PoolPlan], opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotfleet:index:AwsFleet", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        settings = spec.provider_settings("aws")
        self.bucket_uri: pulumi.Output[str] | str = ""
        self.bucket = None
        statements = []
        if spec.checkpoint.provider == "s3":
            self.bucket = _bucket(spec, child)
            prefix = (spec.checkpoint.prefix or spec.name).strip("/")
            self.bucket_uri = self.bucket.bucket.apply(lambda b: f"s3://{b}/{prefix}")
            statements = [_bucket_statements(self.bucket, prefix)]
        role = aws.iam.Role(
            f"{spec.name}-node",
            assume_role_policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "ec2.amazonaws.com"}}
                    ],
                }
            ),
            tags={"spotfleet:fleet": spec.name},
            opts=child,
        )
        if statements:
            aws.iam.RolePolicy(f"{spec.name}-checkpoints", role=role.id, policy=statements[0], opts=child)
        profile = aws.iam.InstanceProfile(
            f"{spec.name}-node", role=role.name, tags={"spotfleet:fleet": spec.name}, opts=child
        )
        self.fleet_ids: dict[str, pulumi.Output[str]] = {}
        for region, planned in by_region(pools).items():
            templates = {p.name: _template(spec, p, profile, settings.ami if settings else "", child) for p in planned}
            for spot, market in ((True, "spot"), (False, "on-demand")):
                group = [p for p in planned if p.spot is spot]
                if group:
                    fleet = _fleet(spec, region, market, group, templates, settings.subnets if settings else {}, self)
                    self.fleet_ids[f"{region}-{market}"] = fleet.id
        self.register_outputs({"fleet_ids": self.fleet_ids, "bucket_uri": self.bucket_uri})


def _template(
    spec: FleetSpec, p: PoolPlan, profile: aws.iam.InstanceProfile, ami: str, opts: pulumi.ResourceOptions
) -> aws.ec2.LaunchTemplate:
    tags = dict(p.tags)
    return aws.ec2.LaunchTemplate(
        p.name,
        image_id=ami or DEFAULT_AMI,
        instance_type=p.pool.instance_type,
        user_data=pulumi.Output.secret(_user_data(p)) if p.secret else _user_data(p),
        iam_instance_profile={"arn": profile.arn},
        metadata_options={"http_tokens": "required", "http_endpoint": "enabled"},
        tag_specifications=[{"resource_type": "instance", "tags": tags}, {"resource_type": "volume", "tags": tags}],
        tags=tags,
        update_default_version=True,
        opts=opts,
    )


def _user_data(p: PoolPlan) -> str:
    from fleet.bootstrap import render_base64

    return render_base64(p.boot)


def _fleet(
    spec: FleetSpec,
    region: str,
    market: str,
    group: list[PoolPlan],
    templates: dict,
    subnets: dict[str, str],
    parent: pulumi.Resource,
) -> aws.ec2.Fleet:
    spot = market == "spot"
    total = weighted_target(group)
    configs = [
        {
            "launch_template_specification": {
                "launch_template_id": templates[p.name].id,
                "version": templates[p.name].latest_version.apply(str),
            },
            "overrides": [
                {
                    "instance_type": p.pool.instance_type,
                    **_placement(p, subnets),
                    "weighted_capacity": p.weighted_capacity,
                    "priority": float(rank),
                }
            ],
        }
        for rank, p in enumerate(sorted(group, key=lambda p: -p.count))
    ]
    capacity = {
        "total_target_capacity": total,
        "default_target_capacity_type": market,
        "spot_target_capacity" if spot else "on_demand_target_capacity": total,
    }
    fleet_tags = {"spotfleet:fleet": spec.name, "spotfleet:market": market}
    return aws.ec2.Fleet(
        f"{spec.name}-{region}-{market}",
        type="maintain",
        region=region,
        launch_template_configs=configs,
        target_capacity_specification=capacity,
        excess_capacity_termination_policy="termination",
        terminate_instances=True,
        replace_unhealthy_instances=True,
        spot_options={
            "allocation_strategy": SPOT_STRATEGY[spec.strategy],
            "instance_interruption_behavior": "terminate",
        }
        if spot
        else None,
        on_demand_options=None if spot else {"allocation_strategy": "prioritized"},
        tags=fleet_tags,
        opts=pulumi.ResourceOptions(parent=parent, ignore_changes=ignore_changes(FLEET_TYPE, spot=spot)),
    )


def _placement(p: PoolPlan, subnets: dict[str, str]) -> dict[str, str]:
    """Where a pool's override places instances: its subnet from ``providers.aws.subnets``, else
    its zone when that is a zone name. A zone ID (``use1-az4``) can only be pinned by a subnet."""
    zone = p.pool.zone
    if zone in subnets:
        return {"subnet_id": subnets[zone]}
    if not zone or zone.startswith(p.pool.region):
        return {"availability_zone": zone} if zone else {}
    raise FleetError(
        f"providers.aws.subnets: pool {p.pool.id} is in zone ID {zone}; map it to a subnet of that "
        f"zone (subnets: {{{zone}: subnet-...}}) so the EC2 Fleet can place it"
    )


def _bucket(spec: FleetSpec, child: pulumi.ResourceOptions) -> aws.s3.Bucket:
    keep = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=True, retain_on_delete=True))
    bucket = aws.s3.Bucket(
        f"{spec.name}-checkpoints",
        bucket=spec.bucket,
        region=spec.checkpoint.region or None,
        tags={"spotfleet:fleet": spec.name},
        opts=keep,
    )
    aws.s3.BucketPublicAccessBlock(
        f"{spec.name}-checkpoints",
        bucket=bucket.id,
        block_public_acls=True,
        block_public_policy=True,
        ignore_public_acls=True,
        restrict_public_buckets=True,
        opts=child,
    )
    aws.s3.BucketServerSideEncryptionConfiguration(
        f"{spec.name}-checkpoints",
        bucket=bucket.id,
        rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}, "bucket_key_enabled": True}],
        opts=child,
    )
    rules = [
        {
            "id": "abort-incomplete-uploads",
            "status": "Enabled",
            "filter": {"prefix": ""},
            "abort_incomplete_multipart_upload": {"days_after_initiation": 1},
        }
    ]
    if spec.checkpoint.expire_days:
        rules.append(
            {
                "id": "expire-checkpoints",
                "status": "Enabled",
                "filter": {"prefix": ""},
                "expiration": {"days": spec.checkpoint.expire_days},
            }
        )
    aws.s3.BucketLifecycleConfiguration(f"{spec.name}-checkpoints", bucket=bucket.id, rules=rules, opts=child)
    return bucket


def _bucket_statements(bucket: aws.s3.Bucket, prefix: str) -> pulumi.Output[str]:
    """A policy reaching only ``bucket/prefix/*`` (and listing only under that prefix)."""
    return bucket.arn.apply(
        lambda arn: json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                        "Resource": f"{arn}/{prefix}/*",
                    },
                    {
                        "Effect": "Allow",
                        "Action": "s3:ListBucket",
                        "Resource": arn,
                        "Condition": {"StringLike": {"s3:prefix": [f"{prefix}/*", prefix]}},
                    },
                ],
            }
        )
    )
