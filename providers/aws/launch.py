"""One EC2 Fleet request of type ``instant`` per launch request, idempotent on the request's token.

The request's pool (instance type x zone x market) becomes one launch template (the AMI, the
node bootstrap as user data, the checkpoint bucket's instance profile) and one override per
subnet of that zone, each with ``WeightedCapacity`` 1 so the target counts instances. Every
instance and volume carries the fleet tags plus ``spotfleet:token`` and a fingerprint of the
request.

Idempotency has two locks: a ``ClientToken`` derived from the token (EC2 answers a repeated
token with the first fleet) and, before anything is created, a look for instances already
tagged with the token (emulators ignore ``ClientToken``; it also answers after EC2 has forgotten
the token). The same token with other parameters is refused with ``IdempotentParameterMismatch``.
The instant response is read as it is: ``Instances`` per lifecycle and ``Errors`` per override;
a shortfall is reported (capacity) or raised (quota, auth and others when nothing launched).
The launch template (its user data holds the node's environment, secrets included) is tagged with
the fleet and the token, and deleted before returning, whatever happened. A run killed between
CreateFleet and that delete leaves it: the rerun of the same token deletes it when it replays the
launch (or replaces it when it launches again); the first look of a process at the fleet in a
region (``AwsProvider.list_instances``, which every ``up``, ``status`` and ``rebalance`` does, or a
launch) deletes the fleet's templates whose token already has instances (CreateFleet went through,
so nothing will use them again: :meth:`Launcher.sweep_once`); and :meth:`Launcher.remove_templates` (``fleet down``, through
``AwsProvider.teardown``) deletes every template carrying the fleet's tag.

A request with ``interconnect`` launches into that cluster placement group
(``providers.aws.interconnect``: made before CreateFleet when missing, named in every override's
``Placement``, deleted by ``teardown``).
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

from fleet import crashpoints
from fleet.bootstrap import boot_for, render_base64
from fleet.errors import NoCapacityError, ProviderError, error_kind
from fleet.model import TAG_FLEET, Instance, InstanceState, LaunchRequest, LaunchResult, Market, fleet_tags, stable_hash
from providers.aws import instances as ec2i
from providers.aws import interconnect
from providers.aws.errors import error_class, to_error
from providers.aws.session import Aws
from providers.aws.settings import AwsSettings

#: Public SSM parameter of the default image: the AWS Deep Learning base AMI (NVIDIA driver, Ubuntu 22.04).
DEFAULT_AMI_PARAMETER = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
MISMATCH = "IdempotentParameterMismatch"


def template_name(token: str) -> str:
    """The launch template of a launch token (stable across reruns)."""
    return "spotfleet-" + hashlib.sha256(token.encode()).hexdigest()[:24]


def client_token(token: str) -> str:
    """EC2's ClientToken for our token (ASCII, at most 64 characters)."""
    return "spotfleet-" + hashlib.sha256(token.encode()).hexdigest()[:48]


def instance_profile_for(checkpoint_uri: str) -> str:
    """The instance profile ``ensure_bucket`` made for the bucket in ``s3://bucket/...`` ("" otherwise)."""
    if not checkpoint_uri.startswith("s3://"):
        return ""
    return profile_name(checkpoint_uri[5:].split("/", 1)[0])


def profile_name(bucket: str) -> str:
    """IAM role and instance profile name for a checkpoint bucket (64 characters at most)."""
    return f"spotfleet-{bucket}"[:64]


class Launcher:
    """Launches requests for one adapter; remembers per-region lookups (AMI, subnets)."""

    def __init__(self, aws: Aws, settings: AwsSettings):
        self.aws = aws
        self.settings = settings
        self._ami: dict[str, str] = {}
        self._subnets: dict[tuple[str, str], list[str]] = {}
        self._swept: set[tuple[str, str]] = set()  # (region, fleet) whose used templates were removed
        self._lock = threading.Lock()

    def launch(self, request: LaunchRequest) -> LaunchResult:
        pool = request.offer.pool
        if pool.provider != "aws":
            raise ProviderError("aws", f"pool {pool.id} belongs to {pool.provider}, not aws", code="InvalidPool")
        tags = self._tags(request)
        found = ec2i.describe(self.aws, pool.region, [{"Name": f"tag:{ec2i.TAG_TOKEN}", "Values": [request.token]}])
        if found:
            self._delete_template(pool.region, template_name(request.token))  # left if a run died after CreateFleet
            return self._replay(request, found, tags[ec2i.TAG_REQUEST])
        subnets = self.subnets(pool.region, pool.zone)
        self.sweep_once(pool.region, request.fleet)
        if request.interconnect:
            interconnect.ensure(self.aws, pool.region, request.interconnect, request.fleet)
        template = self._create_template(request, pool.region)
        try:
            response = self.aws.call(
                "ec2", pool.region, "create_fleet", **self._fleet_params(request, template, subnets, tags)
            )
            crashpoints.reached("aws-fleet-created")
        finally:
            self._delete_template(pool.region, template)
        return self._read(request, response, tags)

    def remove_templates(self, region: str, fleet: str, *, used_only: bool = False) -> list[str]:
        """Delete the launch templates in ``region`` tagged with ``fleet`` (what runs killed before
        their cleanup left), or with ``used_only`` those whose token already has instances; their
        names. Templates without the tag are never touched."""
        found = self.aws.pages(
            "ec2",
            region,
            "describe_launch_templates",
            "LaunchTemplates",
            Filters=[{"Name": f"tag:{TAG_FLEET}", "Values": [fleet]}],
        )
        names = sorted(
            t["LaunchTemplateName"]
            for t in found
            if ec2i.tags_of(t).get(TAG_FLEET) == fleet
            and t.get("LaunchTemplateName")
            and (not used_only or self._used(region, ec2i.tags_of(t).get(ec2i.TAG_TOKEN, "")))
        )
        for name in names:
            try:
                self.aws.call("ec2", region, "delete_launch_template", LaunchTemplateName=name)
            except ProviderError as err:
                if "NotFound" not in err.code:  # gone meanwhile is fine; anything else: `down` again
                    raise
        return names

    # ---- pieces --------------------------------------------------------------------------
    def _tags(self, request: LaunchRequest) -> dict[str, str]:
        o = request.offer
        base = {**request.tags, **fleet_tags(request.fleet, o.pool)}
        print_ = stable_hash([request.fleet, o.pool.id, request.count, sorted(base.items()), request.max_price])
        return {
            **base,
            ec2i.TAG_TOKEN: request.token,
            ec2i.TAG_REQUEST: print_,
            ec2i.TAG_ACCELERATOR: o.accelerator,
            ec2i.TAG_GPUS: str(o.gpus),
            ec2i.TAG_PRICE: f"{o.price_per_hour:.6g}",
        }

    def subnets(self, region: str, zone: str) -> list[str]:
        """Subnets for zone ID ``zone``: the spec's ``subnets`` (by zone ID or name), else the default VPC's."""
        if (region, zone) not in self._subnets:
            self._subnets[(region, zone)] = self._find_subnets(region, zone)
        return self._subnets[(region, zone)]

    def _find_subnets(self, region: str, zone: str) -> list[str]:
        if self.settings.subnets:
            if zone in self.settings.subnets:
                return [self.settings.subnets[zone]]
            names = {
                z["ZoneId"]: z["ZoneName"]
                for z in self.aws.call("ec2", region, "describe_availability_zones")["AvailabilityZones"]
            }
            if names.get(zone) in self.settings.subnets:
                return [self.settings.subnets[names[zone]]]
            raise ProviderError(
                "aws",
                f"providers.aws.subnets names no subnet for zone {zone}; add one (zone ID or zone name -> subnet id)",
                region=region,
                code="NoSubnet",
            )
        found = self.aws.call(
            "ec2",
            region,
            "describe_subnets",
            Filters=[
                {"Name": "availability-zone-id", "Values": [zone]},
                {"Name": "default-for-az", "Values": ["true"]},
            ],
        )
        ids = sorted(s["SubnetId"] for s in found.get("Subnets", []))
        if not ids:
            raise ProviderError(
                "aws",
                f"no default subnet in zone {zone}; list one under providers.aws.subnets",
                region=region,
                code="NoSubnet",
            )
        return ids

    def image(self, region: str) -> str:
        if self.settings.ami:
            return self.settings.ami
        if region not in self._ami:
            try:
                got = self.aws.call("ssm", region, "get_parameter", Name=DEFAULT_AMI_PARAMETER)
            except ProviderError as err:
                raise ProviderError(
                    "aws",
                    f"cannot resolve the default GPU image ({DEFAULT_AMI_PARAMETER}): "
                    f"{err.message}; set providers.aws.ami",
                    region=region,
                    code=err.code,
                ) from None
            self._ami[region] = got["Parameter"]["Value"]
        return self._ami[region]

    def _create_template(self, request: LaunchRequest, region: str) -> str:
        """A launch template named after the token, at version 1; its name (stable across reruns,
        unlike its id) is what CreateFleet references, so a replay under the same ClientToken
        sends EC2 the same parameters."""
        name = template_name(request.token)
        data: dict[str, Any] = {"ImageId": self.image(region), "UserData": render_base64(boot_for("aws", request))}
        profile = instance_profile_for(request.node.checkpoint_uri)
        if profile:
            data["IamInstanceProfile"] = {"Name": profile}
        if request.node.ssh_key:
            data["KeyName"] = request.node.ssh_key
        tagged = [
            {
                "ResourceType": "launch-template",
                "Tags": [{"Key": TAG_FLEET, "Value": request.fleet}, {"Key": ec2i.TAG_TOKEN, "Value": request.token}],
            }
        ]
        try:
            self.aws.call(
                "ec2",
                region,
                "create_launch_template",
                LaunchTemplateName=name,
                LaunchTemplateData=data,
                TagSpecifications=tagged,
            )
        except ProviderError as err:
            if "AlreadyExists" not in err.code:
                raise
            # left behind by a launch that died before cleaning up: start from a fresh one
            self._delete_template(region, name)
            self.aws.call(
                "ec2",
                region,
                "create_launch_template",
                LaunchTemplateName=name,
                LaunchTemplateData=data,
                TagSpecifications=tagged,
            )
        return name

    def _used(self, region: str, token: str) -> bool:
        return bool(token) and bool(
            ec2i.describe(self.aws, region, [{"Name": f"tag:{ec2i.TAG_TOKEN}", "Values": [token]}])
        )

    def sweep_once(self, region: str, fleet: str) -> None:
        """Once per process, region and fleet: delete the fleet's templates that CreateFleet already used."""
        with self._lock:
            if (region, fleet) in self._swept:
                return
            self._swept.add((region, fleet))
        try:
            self.remove_templates(region, fleet, used_only=True)
        except ProviderError:
            pass  # `fleet down` removes them all; a launch does not fail for this

    def _delete_template(self, region: str, name: str) -> None:
        try:
            self.aws.call("ec2", region, "delete_launch_template", LaunchTemplateName=name)
        except ProviderError:
            pass  # gone already, or a cleanup a later launch repeats

    def _fleet_params(
        self, request: LaunchRequest, template: str, subnets: list[str], tags: dict[str, str]
    ) -> dict[str, Any]:
        pool = request.offer.pool
        spot = pool.market is Market.SPOT
        overrides = []
        for subnet in subnets:
            o: dict[str, Any] = {"InstanceType": pool.instance_type, "SubnetId": subnet, "WeightedCapacity": 1.0}
            if request.interconnect:
                o["Placement"] = {"GroupName": request.interconnect}
            if spot and request.max_price is not None:
                o["MaxPrice"] = f"{request.max_price:.6f}"
            overrides.append(o)
        target = {
            "TotalTargetCapacity": request.count,
            "DefaultTargetCapacityType": "spot" if spot else "on-demand",
            "SpotTargetCapacity" if spot else "OnDemandTargetCapacity": request.count,
        }
        aws_tags = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
        return dict(
            Type="instant",
            ClientToken=client_token(request.token),
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": template, "Version": "1"},
                    "Overrides": overrides,
                }
            ],
            TargetCapacitySpecification=target,
            SpotOptions={"AllocationStrategy": "price-capacity-optimized", "InstanceInterruptionBehavior": "terminate"},
            OnDemandOptions={"AllocationStrategy": "lowest-price"},
            TagSpecifications=[{"ResourceType": kind, "Tags": aws_tags} for kind in ("instance", "volume", "fleet")],
        )

    def _read(self, request: LaunchRequest, response: dict[str, Any], tags: dict[str, str]) -> LaunchResult:
        pool = request.offer.pool
        ids = sorted(i for group in response.get("Instances", []) for i in group.get("InstanceIds", []))
        errors = response.get("Errors", [])
        code = message = kind = ""
        if errors:
            first = next((e for e in errors if error_class(e.get("ErrorCode", "")) is NoCapacityError), errors[0])
            code, message = first.get("ErrorCode", "Unknown"), first.get("ErrorMessage", "")
            err = to_error(
                code,
                f"{len(ids)} of {request.count} {pool.instance_type} launched in {pool.id}: {message}",
                region=pool.region,
            )
            if not ids and not isinstance(err, NoCapacityError):
                raise err
            kind, message = error_kind(err), err.message
        elif len(ids) < request.count:
            code, kind = "UnfulfillableCapacity", "capacity"
            message = f"{len(ids)} of {request.count} {pool.instance_type} launched in {pool.id}"
        if ids and code:
            self.aws.call(
                "ec2", pool.region, "create_tags", Resources=ids, Tags=[{"Key": ec2i.TAG_SHORTFALL, "Value": code}]
            )
        now = time.time()
        instances = tuple(
            Instance(
                id=i,
                fleet=request.fleet,
                pool=pool,
                state=InstanceState.PENDING,
                accelerator=request.offer.accelerator,
                gpus=request.offer.gpus,
                price_per_hour=request.offer.price_per_hour,
                launched_at=now,
                tags=dict(tags),
            )
            for i in ids
        )
        return LaunchResult(instances=instances, error_code=code, error_message=message, error_kind=kind)

    def _replay(self, request: LaunchRequest, found: list[dict[str, Any]], fingerprint: str) -> LaunchResult:
        pool = request.offer.pool
        prints = {ec2i.tags_of(r).get(ec2i.TAG_REQUEST) for r in found}
        if prints != {fingerprint}:
            raise ProviderError(
                "aws",
                f"launch token {request.token!r} was already used with different parameters",
                region=pool.region,
                code=MISMATCH,
            )
        instances = tuple(
            i for i in (ec2i.to_instance(r) for r in sorted(found, key=lambda r: r["InstanceId"])) if i is not None
        )
        codes = {ec2i.tags_of(r).get(ec2i.TAG_SHORTFALL) for r in found} - {None, ""}
        if not codes:
            return LaunchResult(instances=instances)
        code = sorted(codes)[0]
        err = to_error(
            code,
            f"{len(instances)} of {request.count} {pool.instance_type} launched in {pool.id} (replayed launch)",
            region=pool.region,
        )
        return LaunchResult(instances=instances, error_code=code, error_message=err.message, error_kind=error_kind(err))
