"""``SpotFleet``: the whole fleet of a plan as one Pulumi ComponentResource.

``SpotFleet(name, spec, plan, env=...)`` declares, per provider with planned pools (and for the
provider that holds the checkpoint bucket), the component of ``stacks.<provider>``; a provider
SDK is imported only when its component is needed. Nothing is priced or planned here: the
plan was made before the program ran, so ``pulumi preview`` shows exactly that plan.

Outputs: ``counts`` (pool id -> planned count), ``price_per_hour`` (the plan's $/h for those
counts), ``plan_id``, ``groups`` (provider -> fleet, group or instance ids), ``bucket_uri``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi

from fleet.errors import FleetError
from fleet.model import Plan
from fleet.spec import FleetSpec
from stacks.layout import STORE_PROVIDER, SUPPORTED, by_provider, pools


class SpotFleet(pulumi.ComponentResource):
    """The plan's pools on every provider, with the checkpoint store and node identities."""

    def __init__(
        self,
        name: str,
        spec: FleetSpec,
        plan: Plan,
        *,
        env: Mapping[str, str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("spotfleet:index:SpotFleet", name, None, opts)
        planned = pools(spec, plan, env)
        groups = by_provider(planned)
        unsupported = sorted(set(groups) - set(SUPPORTED))
        if unsupported:
            raise FleetError(
                f"the plan uses {', '.join(unsupported)}, which Pulumi stacks do not declare; "
                f"disable it under `providers:` and plan again"
            )
        store = STORE_PROVIDER.get(spec.checkpoint.provider)
        if store and store not in groups:
            groups[store] = []
        child = pulumi.ResourceOptions(parent=self)
        self.components: dict[str, pulumi.ComponentResource] = {}
        for provider in SUPPORTED:
            if provider in groups:
                self.components[provider] = _component(provider)(f"{name}-{provider}", spec, groups[provider], child)
        self.counts = {p.pool.id: p.count for p in planned}
        self.price_per_hour = round(sum(p.offer.price_per_hour * p.count for p in planned), 6)
        self.plan_id = plan.id
        self.groups = {
            provider: getattr(c, "fleet_ids", None) or getattr(c, "group_ids", None) or getattr(c, "instance_ids", {})
            for provider, c in self.components.items()
        }
        self.bucket_uri = self.components[store].bucket_uri if store else ""
        self.register_outputs(
            {
                "counts": self.counts,
                "price_per_hour": self.price_per_hour,
                "plan_id": self.plan_id,
                "groups": self.groups,
                "bucket_uri": self.bucket_uri,
            }
        )


def _component(provider: str) -> type:
    """The component class of ``provider``, importing its SDK now (a clear error without it)."""
    import importlib

    from providers.registry import record

    module, _, cls = record(provider).pulumi_stack.partition(":")  # "stacks.aws:AwsFleet"
    try:
        return vars(importlib.import_module(module))[cls]
    except ModuleNotFoundError as err:
        sdk = {"aws": "pulumi-aws", "gcp": "pulumi-gcp", "azure": "pulumi-azure-native"}.get(provider, err.name)
        raise FleetError(
            f"the plan uses {provider} but {sdk} is not installed: pip install 'spotfleet[pulumi]'"
        ) from None
