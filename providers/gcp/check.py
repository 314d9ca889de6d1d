"""``fleet check gcp``: project and credentials found, instances listable, GPU quotas per region.

Quotas come from ``regions.get`` (``quotas[]``: metric, limit, usage) for the spec's regions,
or every region when it names none; only GPU metrics (``*_GPUS``) that have a limit are shown,
as ``"<used> of <limit> used"``. Nothing secret is reported.
"""

from __future__ import annotations

from fleet.errors import AuthError, FleetError, ProviderError
from providers.base import CheckResult
from providers.gcp.provider import GceApi, endpoint_override, resolve_project
from providers.gcp.settings import GcpSettings


def gpu_quotas(api: GceApi, regions: list[str] | None) -> dict[str, str]:
    """``"NVIDIA_H100_GPUS us-central1" -> "2 of 16 used"`` for each GPU quota with a limit."""
    if regions:
        found = [
            api.call(api.regions.get, read=True, region=r, request={"project": api.project, "region": r})
            for r in regions
        ]
    else:
        found = list(api.call(api.regions.list, read=True, request={"project": api.project}))
    out = {}
    for region in found:
        for q in region.quotas:
            if q.metric.endswith("_GPUS") and q.limit > 0:
                out[f"{q.metric} {region.name}"] = f"{q.usage:g} of {q.limit:g} used"
    return out


def check(settings: GcpSettings) -> CheckResult:
    """One CheckResult for GCP (see the module docstring)."""
    try:
        project = resolve_project(settings)
    except FleetError as err:
        return CheckResult(
            provider="gcp",
            ok=False,
            configured=False,
            detail=str(err),
            fix="gcloud auth application-default login && gcloud config set project <id>",
        )
    api = GceApi(project)
    identity = f"project {project}" + (f" via {api.endpoint}" if endpoint_override() else "")
    try:
        api.call(api.instances.aggregated_list, read=True, request={"project": project, "max_results": 1})
    except AuthError as err:
        return CheckResult(
            provider="gcp",
            ok=False,
            identity=identity,
            can_launch=False,
            detail=err.message,
            fix="grant roles/compute.instanceAdmin.v1 on the project, or run `gcloud auth application-default login`",
        )
    except ProviderError as err:
        return CheckResult(
            provider="gcp",
            ok=False,
            identity=identity,
            detail=str(err),
            fix="enable the Compute Engine API: gcloud services enable compute.googleapis.com",
        )
    try:
        quotas = gpu_quotas(api, settings.regions)
    except ProviderError as err:
        return CheckResult(
            provider="gcp",
            ok=True,
            identity=identity,
            can_price=True,
            can_launch=True,
            detail=f"quotas unreadable: {err.message}",
        )
    return CheckResult(
        provider="gcp",
        ok=True,
        identity=identity,
        can_price=True,
        can_launch=True,
        quotas=quotas,
        detail="" if quotas else "no GPU quota in the checked regions",
    )
