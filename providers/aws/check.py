"""``fleet check aws``: whose credentials, can they price, can they launch, what the GPU quotas are.

Each question is one call: ``sts:GetCallerIdentity`` (identity), ``ec2:DescribeSpotPriceHistory``
and ``pricing:GetProducts`` (price), ``ec2:RunInstances`` with ``DryRun`` (launch) and
``servicequotas:GetServiceQuota`` for the GPU instance families (quota, where reachable).
A question whose call cannot be answered is "not determined", never a crash.
"""

from __future__ import annotations

from fleet.errors import AuthError, ProviderError
from providers.aws.launch import Launcher
from providers.aws.session import Aws
from providers.aws.settings import AwsSettings
from providers.base import CheckResult

#: EC2 vCPU quotas of the GPU families (Service Quotas codes).
GPU_QUOTAS = {
    "L-417A185B": "spot P vCPUs",
    "L-7212CCBC": "on-demand P vCPUs",
    "L-3819A6DF": "spot G and VT vCPUs",
    "L-DB2E81BA": "on-demand G and VT vCPUs",
}
DRY_RUN_TYPE = "g4dn.xlarge"
#: Any public image will do for a DryRun (it launches nothing) when the GPU default is not resolvable.
PROBE_AMI_PARAMETER = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"


def check(settings: AwsSettings, *, aws: Aws | None = None) -> CheckResult:
    """The answer for AWS with these settings (the first allowed region is probed)."""
    aws = aws or Aws()
    region = (settings.regions or [aws.default_region])[0]
    try:
        identity = aws.call("sts", region, "get_caller_identity")["Arn"]
    except ProviderError as err:
        return CheckResult(
            provider="aws",
            ok=False,
            configured=err.code != "NoCredentials",
            detail=err.message,
            fix="configure credentials: `aws configure`, `aws sso login`, or AWS_PROFILE",
        )
    notes: list[str] = []
    can_price = _spot_prices(aws, region, notes)
    _list_prices(aws, notes)
    can_launch = _dry_run(aws, settings, region, notes)
    quotas = _quotas(aws, region, notes)
    ok = can_price is not False and can_launch is not False
    fix = "" if ok else "grant ec2:DescribeSpotPriceHistory, ec2:CreateFleet, ec2:RunInstances and iam:PassRole"
    return CheckResult(
        provider="aws",
        ok=ok,
        identity=identity,
        can_price=can_price,
        can_launch=can_launch,
        quotas=quotas,
        detail="; ".join(notes),
        fix=fix,
    )


def _spot_prices(aws: Aws, region: str, notes: list[str]) -> bool | None:
    try:
        aws.call(
            "ec2",
            region,
            "describe_spot_price_history",
            InstanceTypes=[DRY_RUN_TYPE],
            MaxResults=5,
            ProductDescriptions=["Linux/UNIX"],
        )
        return True
    except AuthError:
        notes.append("spot prices denied")
        return False
    except ProviderError as err:
        notes.append(f"spot prices: {err.code or err.message}")
        return None


def _list_prices(aws: Aws, notes: list[str]) -> None:
    try:
        aws.call("pricing", "us-east-1", "describe_services", ServiceCode="AmazonEC2", MaxResults=1)
    except ProviderError:
        notes.append("Price List API unavailable: on-demand prices from the snapshot")


def _dry_run(aws: Aws, settings: AwsSettings, region: str, notes: list[str]) -> bool | None:
    try:
        image = _probe_image(aws, settings, region)
        aws.call(
            "ec2",
            region,
            "run_instances",
            DryRun=True,
            ImageId=image,
            InstanceType=DRY_RUN_TYPE,
            MinCount=1,
            MaxCount=1,
        )
    except ProviderError as err:
        if err.code == "DryRunOperation":
            return True
        if err.code in ("UnauthorizedOperation", "AccessDenied", "AuthFailure"):
            notes.append("launch denied")
            return False
        notes.append(f"launch not determined: {err.code or err.message}")
        return None
    return True


def _probe_image(aws: Aws, settings: AwsSettings, region: str) -> str:
    try:
        return Launcher(aws, settings).image(region)
    except ProviderError:
        return aws.call("ssm", region, "get_parameter", Name=PROBE_AMI_PARAMETER)["Parameter"]["Value"]


def _quotas(aws: Aws, region: str, notes: list[str]) -> dict[str, str]:
    out = {}
    for code, label in GPU_QUOTAS.items():
        try:
            quota = aws.call("service-quotas", region, "get_service_quota", ServiceCode="ec2", QuotaCode=code)
        except ProviderError:
            notes.append("GPU quotas not readable")
            break
        out[f"{label} {region}"] = f"{quota['Quota']['Value']:g}"
    return out
