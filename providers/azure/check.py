"""``fleet check azure``: is there a subscription, does ARM accept us, can we price and launch?

Three calls: Resource SKUs (``can_price``), the resource group (``can_launch``: readable, or
absent and creatable by the first ``fleet up``), and the compute usages of the regions the
settings allow (Spot vCPU quota ``lowPriorityCores``, ``cores`` and the GPU families' on-demand
quotas: ``providers.azure.quotas``). No secret is part of the result.
"""

from __future__ import annotations

from fleet.errors import AuthError, ProviderError
from providers.azure.arm import Arm, wire
from providers.azure.offers import sku_places
from providers.azure.provider import DEFAULT_RESOURCE_GROUP
from providers.azure.quotas import to_quotas
from providers.azure.settings import AzureSettings
from providers.base import CheckResult

FIX_LOGIN = (
    "sign in (`az login`, or AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET) and set "
    "providers.azure.subscription_id or $AZURE_SUBSCRIPTION_ID"
)
MAX_QUOTA_REGIONS = 4


def check(settings: AzureSettings, arm: Arm | None = None) -> CheckResult:
    """One CheckResult for Azure with ``settings``."""
    try:
        arm = arm or Arm.from_env(settings.subscription_id, polling_interval=1.0)
    except AuthError as err:  # no subscription named anywhere: the user has not set Azure up
        return CheckResult(
            provider="azure",
            ok=False,
            configured=False,
            can_price=False,
            can_launch=False,
            detail=err.message,
            fix=FIX_LOGIN,
        )
    where = f"subscription {arm.subscription} at {arm.endpoint}"
    try:
        skus = arm.call(lambda: [wire(s) for s in arm.compute.resource_skus.list()], "list resource SKUs")
    except AuthError as err:
        return CheckResult(
            provider="azure",
            ok=False,
            can_price=False,
            can_launch=False,
            detail=f"{where}: {err.message}",
            fix=FIX_LOGIN,
        )
    except ProviderError as err:
        return CheckResult(
            provider="azure",
            ok=False,
            can_price=False,
            can_launch=None,
            detail=f"{where}: {err}",
            fix="check the network and SPOTFLEET_AZURE_ARM_ENDPOINT, then run `fleet check azure` again",
        )
    places = sorted({r for s in skus for r, _ in sku_places(s) if settings.allows(r, "")})
    rg = settings.resource_group or DEFAULT_RESOURCE_GROUP
    try:
        arm.call(lambda: arm.resources.resource_groups.check_existence(rg), f"find resource group {rg}")
        can_launch: bool | None = True
    except AuthError as err:
        return CheckResult(
            provider="azure",
            ok=False,
            identity=where,
            can_price=True,
            can_launch=False,
            detail=f"resource group {rg}: {err.message}",
            fix=f"grant the Contributor role on resource group {rg} (or the subscription)",
        )
    except ProviderError as err:
        can_launch = None
        where = f"{where}; resource group {rg}: {err}"
    quotas: dict[str, str] = {}
    for region in (settings.regions or places)[:MAX_QUOTA_REGIONS]:
        try:
            usages = arm.call(lambda: [wire(u) for u in arm.compute.usage.list(region)], f"usages in {region}")
        except ProviderError:
            continue
        for q in to_quotas(region, usages, skus):
            quotas[f"{q.name} {region}"] = f"{q.in_use:g} of {q.limit:g} vCPUs used"
    ok = bool(places) and can_launch is True
    return CheckResult(
        provider="azure",
        ok=ok,
        identity=where,
        can_price=True,
        can_launch=can_launch,
        quotas=quotas,
        detail=f"GPU sizes offered in {len(places)} region(s)",
        fix=""
        if ok
        else "no GPU size (NC/ND/NV) is offered to this subscription in the allowed "
        "regions: widen providers.azure.regions or request access",
    )
