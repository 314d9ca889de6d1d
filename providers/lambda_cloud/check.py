"""``fleet check lambda``: is there a key, does Lambda accept it, which types have capacity now?

One ``GET /instance-types`` proves the key (every Lambda call needs one: ``can_price`` and
``can_launch`` together) and says which regions have capacity now; one ``GET /instances``
counts what the account runs. Lambda's API reports no quota (new accounts have an instance
limit that grows as invoices are paid; a launch over it is refused with ``global/quota-exceeded``).
The key itself is never part of the result.
"""

from __future__ import annotations

from fleet.errors import AuthError, ProviderError
from fleet.spec import ProviderSettings
from providers.base import CheckResult
from providers.lambda_cloud.api import FIX_KEY, URL_ENV, LambdaApi
from providers.lambda_cloud.errors import PROVIDER


def check(settings: ProviderSettings, api: LambdaApi | None = None) -> CheckResult:
    """One CheckResult for Lambda with ``settings`` (two calls)."""
    api = api or LambdaApi(retry_delays=(0.5, 1.0))
    where = f"at {api.url}"
    if not api.has_key:
        return CheckResult(
            provider=PROVIDER,
            ok=False,
            configured=False,
            can_price=False,
            can_launch=False,
            detail=f"no API key {where}",
            fix=FIX_KEY,
        )
    try:
        types = api.instance_types()
        rows = api.instances()
    except AuthError as err:
        return CheckResult(
            provider=PROVIDER,
            ok=False,
            can_price=False,
            can_launch=False,
            detail=f"the API key was refused {where}: {err.message}",
            fix=FIX_KEY,
        )
    except ProviderError as err:
        return CheckResult(
            provider=PROVIDER,
            ok=False,
            can_price=None,
            can_launch=None,
            detail=f"could not read the API {where}: {err}",
            fix=f"check the network and ${URL_ENV}, then run `fleet check lambda` again",
        )
    pools = sum(
        1 for item in types.values() for r in item.regions_with_capacity_available if settings.allows(r.name, "")
    )
    quotas = {
        "instances": f"{sum(1 for r in rows if r.status not in ('terminating', 'terminated'))} in the account",
        "capacity now": f"{pools} type/region pools",
    }
    return CheckResult(
        provider=PROVIDER,
        ok=True,
        identity="API key accepted",
        can_price=True,
        can_launch=True,
        quotas=quotas,
        detail=where,
    )
