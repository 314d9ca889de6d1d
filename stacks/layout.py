"""What a stack declares for a plan: pools, stable names, tags, start-up scripts (pure, no Pulumi).

:func:`pools` turns a :class:`Plan` into one :class:`PoolPlan` per allocation with a count, in
pool-id order. The logical name of a pool's resources is ``<provider>-<pool short hash>``: it
depends on the pool only, so a new plan with different counts updates resources in place, and a
pool that leaves the plan is the only thing deleted. Each pool carries the tags ``fleet up``
applies (:func:`fleet.model.fleet_tags`) and the same :class:`fleet.bootstrap.NodeBoot`, so
its start-up script is byte for byte the one ``fleet up`` renders (``secret`` says the script
holds resolved secrets, which a stack then marks as a Pulumi secret).

:func:`checkpoint_uri` is the URI nodes receive, in the form the adapters' ``ensure_bucket``
returns it plus the prefix (``fleet.provisioning.storage``).

:func:`require_node_software` refuses ``node.spotfleet: ship`` (see there): stack nodes get
spotfleet from a pip requirement or their image.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from fleet.bootstrap import NodeBoot
from fleet.errors import FleetError
from fleet.model import Allocation, Market, Offer, Plan, PoolKey, fleet_tags
from fleet.secrets import REF_RE
from fleet.spec import SHIP, FleetSpec
from providers.registry import records

#: Providers a stack can declare: those whose registration record names a stack component.
SUPPORTED = tuple(name for name, rec in records().items() if rec.pulumi_stack)
#: Which provider holds each checkpoint store (as in ``fleet.provisioning.storage``).
STORE_PROVIDER = {"s3": "aws", "gcs": "gcp", "azure": "azure"}
_STORE_SCHEME = {"s3": "s3", "gcs": "gs", "azure": "az"}


@dataclass(frozen=True)
class PoolPlan:
    """One planned pool: its allocation, throughput weight per instance, name, tags and boot."""

    allocation: Allocation
    weight: float
    name: str
    tags: Mapping[str, str]
    boot: NodeBoot
    secret: bool = False  # the start-up script holds resolved ``${env:...}`` values

    @property
    def offer(self) -> Offer:
        return self.allocation.offer

    @property
    def pool(self) -> PoolKey:
        return self.allocation.offer.pool

    @property
    def count(self) -> int:
        return self.allocation.count

    @property
    def spot(self) -> bool:
        return self.pool.market is Market.SPOT

    @property
    def weighted_capacity(self) -> float:
        """Weighted GPUs one instance of this pool provides (an EC2 Fleet override weight)."""
        return round(self.offer.gpus * self.weight, 6)


def logical_name(pool: PoolKey) -> str:
    """The stable logical name of a pool's resources (letters, digits, dashes; at most 16 chars)."""
    return f"{pool.provider}-{pool.short_hash}"


def azure_account(spec: FleetSpec) -> str:
    """The storage account the Azure stack keeps checkpoints in: ``providers.azure.storage_account``,
    else one named after the fleet (3-24 lowercase letters and digits)."""
    settings = spec.provider_settings("azure")
    if settings and settings.storage_account:
        return settings.storage_account
    return re.sub(r"[^a-z0-9]", "", spec.name)[:18] + "ckpt"


def checkpoint_uri(spec: FleetSpec) -> str:
    """Where nodes write checkpoints ("" for ``checkpoint.provider: local``). Azure URIs name the
    account (``az://container@account/prefix``), so nodes reach it with their managed identity."""
    store = spec.checkpoint.provider
    if store == "local":
        return ""
    prefix = (spec.checkpoint.prefix or spec.name).strip("/")
    if store == "azure":
        return f"az://{spec.bucket}@{azure_account(spec)}/{prefix}"
    return f"{_STORE_SCHEME[store]}://{spec.bucket}/{prefix}"


def require_node_software(spec: FleetSpec) -> None:
    """Raise FleetError when ``node.spotfleet`` is ``ship``: ``fleet up`` ships spotfleet's wheel
    with a URL minted at each launch and valid for hours, but a stack's launch templates, instance
    templates and scale sets start nodes for as long as they exist, long after any such URL expired."""
    if spec.node.spotfleet == SHIP:
        raise FleetError(
            "node.spotfleet is 'ship' (the default), which only `fleet up` can do (a wheel URL minted at each "
            "launch); a Pulumi stack's templates start nodes long after such a URL expired. Set node.spotfleet "
            "to a pip requirement the nodes can install (e.g. 'git+https://host/spotfleet.git@<commit>' or "
            "'spotfleet[s3]==0.1.0' from your index) or to 'preinstalled' (node.image has spotfleet)"
        )


def pools(spec: FleetSpec, plan: Plan, env: Mapping[str, str] | None = None) -> list[PoolPlan]:
    """The plan's pools with a count, in pool-id order. ``env`` is the resolved ``node.env``
    (``fleet.secrets.resolve_env``); ``None`` keeps the spec's references.

    Raises FleetError when the plan was made for another fleet: a stack must never apply a plan
    for a different spec by mistake, and when ``node.spotfleet`` is ``ship`` (:func:`require_node_software`).
    """
    if plan.fleet != spec.name:
        raise FleetError(
            f"the plan is for fleet {plan.fleet!r} but the spec is {spec.name!r}: "
            f"run `fleet plan SPEC --out plan.json` for this spec"
        )
    if plan.spec_hash != spec.spec_hash():
        raise FleetError(
            f"the plan was made for another version of spec {spec.name!r} "
            f"(spec hash {plan.spec_hash}, now {spec.spec_hash()}): plan again with --out"
        )
    require_node_software(spec)
    uri = checkpoint_uri(spec)
    node_env = dict(spec.node.env if env is None else env)
    secret = env is not None and any(REF_RE.search(v) for v in spec.node.env.values())
    out = []
    for alloc in sorted(plan.allocations, key=lambda a: a.offer.pool.id):
        if alloc.count <= 0:
            continue
        pool = alloc.offer.pool
        boot = NodeBoot(
            fleet=spec.name,
            pool=pool.id,
            provider=pool.provider,
            command=spec.node.startup,
            checkpoint_uri=uri,
            env=node_env,
            spotfleet=spec.node.spotfleet,
        )
        out.append(
            PoolPlan(
                allocation=alloc,
                weight=spec.weight(alloc.offer.accelerator) or 1.0,
                name=logical_name(pool),
                tags=fleet_tags(spec.name, pool, plan.id),
                boot=boot,
                secret=secret,
            )
        )
    return out


def by_provider(planned: list[PoolPlan]) -> dict[str, list[PoolPlan]]:
    out: dict[str, list[PoolPlan]] = {}
    for p in planned:
        out.setdefault(p.pool.provider, []).append(p)
    return out


def by_region(planned: list[PoolPlan]) -> dict[str, list[PoolPlan]]:
    out: dict[str, list[PoolPlan]] = {}
    for p in planned:
        out.setdefault(p.pool.region, []).append(p)
    return dict(sorted(out.items()))


def weighted_target(planned: list[PoolPlan]) -> int:
    """Integer capacity units (weighted GPUs, rounded up) that hold ``planned`` at their counts."""
    return math.ceil(round(sum(p.count * p.weighted_capacity for p in planned), 6))


def label_value(text: str) -> str:
    """``text`` as a GCP label value or key part (lowercase, digits, ``-_``; 63 chars at most)."""
    return re.sub(r"[^a-z0-9_-]", "_", text.lower())[:63]


def gcp_labels(tags: Mapping[str, str]) -> dict[str, str]:
    """Fleet tags as GCP labels: ``spotfleet:fleet`` -> ``spotfleet_fleet``; the pool id (which
    has ``/``) becomes its short hash under ``spotfleet_pool_hash``; the full pool id travels
    in the instance metadata (``spotfleet-pool``)."""
    out = {}
    for key, value in tags.items():
        if key == "spotfleet:pool":
            out["spotfleet_pool_hash"] = PoolKey.from_id(value).short_hash
        else:
            out[label_value(key.replace(":", "_"))] = label_value(value)
    return out
