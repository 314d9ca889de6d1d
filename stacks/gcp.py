"""GCP part of a SpotFleet: instance templates, regional managed instance groups, bucket, account.

Per planned pool an instance template (``SPOT`` or ``STANDARD`` provisioning, GPUs terminate on
host maintenance, the shared bootstrap as ``startup-script``, fleet labels and the full pool id
in metadata) and a regional managed instance group distributed to the pool's zone with
``targetSize`` = the planned count. A spot group's size belongs to the rebalancer
(``stacks.ownership``); an on-demand group's size is the baseline and belongs to Pulumi.

A service account runs every node. With ``checkpoint.provider: gcs``: a bucket (protected,
retained on delete) with uniform bucket-level access, public access prevention and a lifecycle,
and an IAM binding for that account limited by condition to ``prefix/``.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from fleet.bootstrap import render
from fleet.spec import FleetSpec
from stacks.layout import PoolPlan, gcp_labels
from stacks.ownership import ignore_changes

MIG_TYPE = "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager"
#: Boot image of every node: a Deep Learning VM image with the NVIDIA driver.
DEFAULT_IMAGE = "projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11-py310"


class GcpFleet(pulumi.ComponentResource):
    """The GCP pools of a plan. Outputs: ``group_ids`` (pool name -> MIG id), ``bucket_uri``."""

    def __init__(self, name: str, spec: FleetSpec, pools: list[PoolPlan], opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotfleet:index:GcpFleet", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        settings = spec.provider_settings("gcp")
        project = (settings.project if settings else "") or None
        account = gcp.serviceaccount.Account(
            f"{spec.name}-node",
            account_id=f"{spec.name}-node"[:30],
            display_name=f"spotfleet {spec.name} nodes",
            project=project,
            opts=child,
        )
        self.bucket = None
        self.bucket_uri: pulumi.Output[str] | str = ""
        if spec.checkpoint.provider == "gcs":
            self.bucket = _bucket(spec, project, child)
            prefix = (spec.checkpoint.prefix or spec.name).strip("/")
            self.bucket_uri = self.bucket.name.apply(lambda b: f"gs://{b}/{prefix}")
            gcp.storage.BucketIAMMember(
                f"{spec.name}-checkpoints",
                bucket=self.bucket.name,
                role="roles/storage.objectUser",
                member=account.email.apply(lambda e: f"serviceAccount:{e}"),
                condition={
                    "title": "checkpoint-prefix",
                    "expression": self.bucket.name.apply(
                        lambda b: f'resource.name.startsWith("projects/_/buckets/{b}/objects/{prefix}/")'
                    ),
                },
                opts=child,
            )
        self.group_ids: dict[str, pulumi.Output[str]] = {}
        for p in pools:
            template = _template(spec, p, account, project, child)
            group = gcp.compute.RegionInstanceGroupManager(
                p.name,
                base_instance_name=p.name,
                region=p.pool.region,
                project=project,
                distribution_policy_zones=[p.pool.zone] if p.pool.zone else None,
                versions=[{"name": "primary", "instance_template": template.self_link_unique}],
                target_size=p.count,
                wait_for_instances=False,
                update_policy={
                    "type": "OPPORTUNISTIC",
                    "minimal_action": "REPLACE",
                    "instance_redistribution_type": "NONE",
                },
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=ignore_changes(MIG_TYPE, spot=p.spot)),
            )
            self.group_ids[p.name] = group.id
        self.register_outputs({"group_ids": self.group_ids, "bucket_uri": self.bucket_uri})


def _template(
    spec: FleetSpec, p: PoolPlan, account: gcp.serviceaccount.Account, project: str | None, opts: pulumi.ResourceOptions
) -> gcp.compute.InstanceTemplate:
    scheduling = (
        {
            "provisioning_model": "SPOT",
            "preemptible": True,
            "automatic_restart": False,
            "on_host_maintenance": "TERMINATE",
            "instance_termination_action": "DELETE",
        }
        if p.spot
        else {
            "provisioning_model": "STANDARD",
            "preemptible": False,
            "automatic_restart": True,
            "on_host_maintenance": "TERMINATE",
        }
    )
    script = render(p.boot)
    return gcp.compute.InstanceTemplate(
        p.name,
        name_prefix=f"{p.name}-",
        machine_type=p.pool.instance_type,
        project=project,
        region=p.pool.region,
        disks=[{"boot": True, "auto_delete": True, "source_image": DEFAULT_IMAGE, "disk_size_gb": 200}],
        network_interfaces=[{"network": "default"}],
        scheduling=scheduling,
        metadata={
            "startup-script": pulumi.Output.secret(script) if p.secret else script,
            "spotfleet-fleet": spec.name,
            "spotfleet-pool": p.pool.id,
        },
        labels=gcp_labels(p.tags),
        service_account={"email": account.email, "scopes": ["cloud-platform"]},
        opts=opts,
    )


def _bucket(spec: FleetSpec, project: str | None, child: pulumi.ResourceOptions) -> gcp.storage.Bucket:
    rules = [{"action": {"type": "AbortIncompleteMultipartUpload"}, "condition": {"age": 1}}]
    if spec.checkpoint.expire_days:
        rules.append({"action": {"type": "Delete"}, "condition": {"age": spec.checkpoint.expire_days}})
    keep = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=True, retain_on_delete=True))
    return gcp.storage.Bucket(
        f"{spec.name}-checkpoints",
        name=spec.bucket,
        project=project,
        location=(spec.checkpoint.region or "US").upper(),
        uniform_bucket_level_access=True,
        public_access_prevention="enforced",
        lifecycle_rules=rules,
        labels={"spotfleet_fleet": spec.name},
        opts=keep,
    )
