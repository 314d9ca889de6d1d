"""``fleet check oci``: is there an API key, does OCI accept it, can shapes be listed, is a launch set up?

One call per question: ListAvailabilityDomains (the key is accepted), ListShapes in the
compartment (``can_price``: OCI prices are list prices, what is live is which shapes the
compartment can launch where) and ListInstances (``can_launch``, with the compartment, subnet and
image OCIDs set; OCI has no dry-run launch). The key itself is never part of the result.
"""

from __future__ import annotations

from fleet.errors import AuthError, ProviderError
from providers.base import CheckResult
from providers.oci.api import OciApi
from providers.oci.settings import OciSettings

FIX_KEY = (
    "create an API key with `oci setup config` (it writes ~/.oci/config), or name the file and profile under "
    "providers.oci.config_file/profile"
)


def check(settings: OciSettings, api: OciApi | None = None) -> CheckResult:
    """One CheckResult for OCI with ``settings``."""
    api = api or OciApi(config_file=settings.config_file, profile=settings.profile, region=settings.region)
    try:
        identity = f"tenancy {api.tenancy} in {api.region}"
    except AuthError as err:
        return CheckResult(provider="oci", ok=False, configured=False, detail=err.message, fix=FIX_KEY)
    try:
        ads = api.availability_domains(settings.compartment_id or api.tenancy)
    except AuthError as err:
        return CheckResult(
            provider="oci",
            ok=False,
            can_price=False,
            can_launch=False,
            detail=f"the API key was refused: {err.message}",
            fix=FIX_KEY,
        )
    except ProviderError as err:
        return CheckResult(
            provider="oci",
            ok=False,
            detail=f"could not reach OCI: {err}",
            fix="check the network, the profile's region and $SPOTFLEET_OCI_ENDPOINT",
        )
    missing = settings.missing()
    if missing:
        return CheckResult(
            provider="oci",
            ok=False,
            identity=identity,
            can_price=None,
            can_launch=False,
            detail=f"{len(ads)} availability domain(s); {', '.join(missing)} not set",
            fix="set the compartment, subnet and GPU image OCIDs under providers.oci",
        )
    notes: list[str] = []
    try:
        gpu = sorted({s.shape for s in api.shapes(settings.compartment_id) if s.gpus})
        can_price: bool | None = True
        notes.append(f"{len(gpu)} GPU shape(s)")
    except ProviderError as err:
        can_price = False if isinstance(err, AuthError) else None
        notes.append(f"shapes: {err.code or err.message}")
    try:
        running = [r for r in api.instances(settings.compartment_id) if r.lifecycle_state != "TERMINATED"]
        can_launch: bool | None = True
        quotas = {"instances": f"{len(running)} in the compartment"}
    except ProviderError as err:
        can_launch = False if isinstance(err, AuthError) else None
        quotas = {}
        notes.append(f"instances: {err.code or err.message}")
    ok = bool(can_price) and bool(can_launch)
    return CheckResult(
        provider="oci",
        ok=ok,
        identity=identity,
        can_price=can_price,
        can_launch=can_launch,
        quotas=quotas,
        detail="; ".join([f"{len(ads)} availability domain(s)", *notes]),
        fix="" if ok else "grant the user's group `manage instance-family` in the compartment",
    )
