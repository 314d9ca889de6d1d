"""Small immutable value types shared by the planner, the executor and the providers.

Every type round-trips through JSON (``model_dump(mode="json")`` /
``model_validate``), so a plan can be saved, reviewed and applied later.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import Enum
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Market(str, Enum):
    SPOT = "spot"
    ON_DEMAND = "on-demand"


class PoolKey(Frozen):
    """One place capacity can come from: provider, region, zone, instance type, market.

    ``zone`` is empty where the provider has no zones (Azure regions, Vast hosts).
    """

    provider: str
    region: str
    zone: str = ""
    instance_type: str
    market: Market

    @property
    def id(self) -> str:
        """Stable, human-readable identifier: ``aws/us-east-1/use1-az4/p5.48xlarge/spot``."""
        return "/".join((self.provider, self.region, self.zone or "-", self.instance_type, self.market.value))

    @property
    def short_hash(self) -> str:
        return hashlib.sha256(self.id.encode()).hexdigest()[:10]

    @staticmethod
    def id_of(data: Any) -> str:
        """``id`` of a pool given as JSON data (``model_dump(mode="json")``), without building one;
        ValueError or TypeError when it is not a pool."""
        if not isinstance(data, dict) or set(data) - {"provider", "region", "zone", "instance_type", "market"}:
            raise ValueError("the pool is not a pool")
        parts = [data["provider"], data["region"], data.get("zone", "") or "-", data["instance_type"], data["market"]]
        if not all(isinstance(p, str) for p in parts):
            raise ValueError(f"pool {parts!r} is not a pool")
        Market(data["market"])
        return "/".join(parts)

    @classmethod
    def from_id(cls, pool_id: str) -> PoolKey:
        """The pool ``id`` names; ValueError when it names none. Every field is text split from the
        id and the market is checked here, so the key is built without pydantic's validation (no
        validator is built for it: a read-only command that only parses ids builds none)."""
        provider, region, zone, instance_type, market = pool_id.split("/")
        return cls.model_construct(
            provider=provider,
            region=region,
            zone="" if zone == "-" else zone,
            instance_type=instance_type,
            market=Market(market),
        )


class InterruptionSource(str, Enum):
    """Where an interruption estimate came from, strongest evidence last."""

    NONE = "none"  # on-demand: not interruptible
    PROVIDER_PRIOR = "provider-prior"
    SPOT_ADVISOR = "spot-advisor"  # AWS interruption-frequency band
    PLACEMENT_SCORE = "placement-score"
    TRACE = "trace"  # derived from a recorded availability trace
    OBSERVED = "observed"  # this fleet's own history


class Offer(Frozen):
    """One pool with its price and risk.

    ``interruptions_per_hour`` is the expected rate at which one running instance of
    this pool is taken back (0 for on-demand). ``capacity_hint`` is the number of
    instances the pool is believed to hold now, ``None`` when unknown.
    ``on_demand_price`` is the same instance type's on-demand price where known,
    used for savings figures.
    """

    pool: PoolKey
    accelerator: str
    gpus: int = Field(ge=0)  # 0: a CPU-only type (accelerator ``CPU``), offered for head nodes
    vcpus: float | None = None
    memory_gib: float | None = None
    price_per_hour: float = Field(ge=0)
    on_demand_price: float | None = None
    interruptions_per_hour: float = Field(default=0.0, ge=0)
    interruption_source: InterruptionSource = InterruptionSource.NONE
    capacity_hint: int | None = None
    source: str = "snapshot"

    @property
    def market(self) -> Market:
        return self.pool.market

    @property
    def price_per_gpu_hour(self) -> float:
        return self.price_per_hour / self.gpus if self.gpus else self.price_per_hour


class Allocation(Frozen):
    """``count`` instances of ``offer``'s pool; ``weighted_gpus`` counts throughput weight.

    ``role`` is ``worker`` (the spec's capacity) or ``head`` (the spec's ``head:``, on-demand)."""

    offer: Offer
    count: int = Field(ge=0)
    weighted_gpus: float
    true_cost_per_hour: float
    role: str = "worker"


class Exclusion(Frozen):
    """Why a group of offers was left out of a plan (``reason`` is a short phrase)."""

    reason: str
    pools: int
    example: str = ""


class PlanTotals(Frozen):
    gpus: int
    weighted_gpus: float
    target_weighted_gpus: float
    on_demand_weighted_gpus: float
    price_per_hour: float
    true_cost_per_hour: float
    true_cost_per_weighted_gpu_hour: float
    expected_interruptions_per_day: float
    on_demand_alternative_per_hour: float | None = None
    savings_fraction: float | None = None
    checkpoint_interval_seconds: float | None = None
    pools: int = 0


class PlacementChoice(Frozen):
    """Where a plan under a ``placement`` rule put every node, and what the next best domain
    would cost. ``objective`` is what the strategy ranks by (``metric`` names it), exact for
    the winner and the runner-up; ``solved`` of the ``domains`` allowed were solved, the rest
    ruled out by a lower bound. ``interconnect`` names the provider feature a zone-level
    coupled plan wants (cluster placement group, compact placement, proximity placement
    group), or is empty where the provider exposes none."""

    level: str
    domain: str
    metric: str
    objective: float
    domains: int
    solved: int
    runner_up: str = ""
    runner_up_objective: float | None = None
    interconnect: str = ""


class Plan(Frozen):
    """The contract between deciding and doing: what to run, where, and what it costs.

    ``feasible`` is False when the spec cannot be met; then ``shortfall`` says which
    constraint binds and the allocations are the best partial plan.
    """

    fleet: str
    spec_hash: str
    strategy: str
    allocations: tuple[Allocation, ...]
    totals: PlanTotals
    feasible: bool = True
    shortfall: str = ""
    exclusions: tuple[Exclusion, ...] = ()
    notes: tuple[str, ...] = ()
    placement: PlacementChoice | None = None

    @property
    def id(self) -> str:
        """Content hash: the same decision always has the same id."""
        return plan_id([(a.offer.pool.id, a.count) for a in self.allocations], self.spec_hash)

    def counts(self) -> dict[str, int]:
        """Desired instance count per pool id (heads and workers together)."""
        out: dict[str, int] = {}
        for a in self.allocations:
            if a.count > 0:
                out[a.offer.pool.id] = out.get(a.offer.pool.id, 0) + a.count
        return out

    def role_allocations(self, role: str) -> tuple[Allocation, ...]:
        """The allocations of one role (``head`` or ``worker``)."""
        return tuple(a for a in self.allocations if a.role == role)

    def to_json(self) -> str:
        data = self.model_dump(mode="json")
        data["id"] = self.id
        return json.dumps(data, indent=2)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """The plan in ``text`` (``to_json``'s output, or a plan saved by ``fleet plan --out``,
        which also holds the spec it was made for and where it was read from)."""
        data = json.loads(text)
        for derived in ("id", "spec", "spec_path", "spec_file_hash"):
            data.pop(derived, None)
        return cls.model_validate(data)


def plan_id(pool_counts: list[tuple[str, int]], spec_hash: str) -> str:
    """A plan's content hash from its (pool id, count) allocations in order and its spec's hash."""
    body = json.dumps([list(pc) for pc in pool_counts] + [spec_hash], sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class PlanDigest:
    """What a read-only look at a fleet needs of its stored plan (``fleet status``, ``fleet
    history``): its id, instance count per pool, price per hour and the on-demand price per
    pool, read from the plan's JSON as plain data. Reading it builds no pydantic validator
    (building one costs a command start-up tens of milliseconds); the plan was validated when it
    was written, and ``from_json`` still checks the type of every field it reads, raising
    ``ValueError`` or ``TypeError`` (as ``Plan.from_json`` does) on a plan it cannot read."""

    id: str
    pools: dict[str, int]
    price_per_hour: float
    on_demand: dict[str, float]

    def counts(self) -> dict[str, int]:
        """Desired instance count per pool id (heads and workers together), as ``Plan.counts``."""
        return dict(self.pools)

    @classmethod
    def from_json(cls, text: str) -> PlanDigest:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError("the plan is not a JSON object")
        allocations = data["allocations"]
        if not isinstance(allocations, list):
            raise TypeError("allocations is not a list")
        pairs: list[tuple[str, int]] = []
        pools: dict[str, int] = {}
        on_demand: dict[str, float] = {}
        for a in allocations:
            offer, count = a["offer"], _typed(a["count"], int, "count")
            pool = PoolKey.id_of(offer["pool"])
            if count < 0:
                raise ValueError(f"allocation {pool} counts {count} instances")
            pairs.append((pool, count))
            if count > 0:
                pools[pool] = pools.get(pool, 0) + count
            price = (
                offer["price_per_hour"]
                if offer["pool"]["market"] == Market.ON_DEMAND.value
                else offer.get("on_demand_price")
            )
            if price is not None:
                on_demand[pool] = _typed(price, float, "price")
        return cls(
            id=plan_id(pairs, _typed(data["spec_hash"], str, "spec_hash")),
            pools=pools,
            price_per_hour=_typed(data["totals"]["price_per_hour"], float, "price_per_hour"),
            on_demand=on_demand,
        )


def _typed(value: Any, kind: type, name: str) -> Any:
    """``value`` when it is a ``kind`` (an int counts as a float, a bool as neither), else TypeError."""
    allowed = (int, float) if kind is float else (kind,)
    if isinstance(value, bool) or not isinstance(value, allowed):
        raise TypeError(f"{name} holds {type(value).__name__}, expected {kind.__name__}")
    if kind is float and isinstance(value, (int, float)):
        return float(value)
    return value


class QuotaUnit(str, Enum):
    GPUS = "gpus"
    VCPUS = "vcpus"


class Quota(Frozen):
    """One account limit: at most ``limit`` ``unit`` may run at once in the pools it covers.

    It covers the pools of ``provider`` in ``region`` ("" = every region), in ``market``
    (``None`` = both markets count against it), whose accelerator is ``accelerator`` ("" =
    any) and whose instance type matches one of the shell patterns ``instance_types``
    (``()`` = any; ``p*`` for AWS's "All P Spot Instance Requests", ``Standard_NDs*`` for an
    Azure VM family). ``zones`` (qualified ``provider/region/zone``, ``-`` for a provider
    without zones; ``()`` = any) narrows it to pools in those zones: the rebalancer's hedge caps
    a group of zones that failed together this way (``fleet.rebalance.hedge``). ``in_use`` is
    what the whole account runs in its scope now, this fleet's instances included, so the fleet
    may hold ``limit - in_use`` plus what it already runs there. ``name`` is the vendor's name
    for the quota, shown when it binds.
    """

    provider: str
    region: str = ""
    market: Market | None = None
    accelerator: str = ""
    instance_types: tuple[str, ...] = ()
    unit: QuotaUnit = QuotaUnit.GPUS
    limit: float = Field(ge=0)
    in_use: float = Field(default=0.0, ge=0)
    name: str = ""
    zones: tuple[str, ...] = ()

    def covers(self, offer: Offer) -> bool:
        """Whether ``offer``'s pool counts against this quota."""
        pool = offer.pool
        if pool.provider != self.provider or (self.region and pool.region != self.region):
            return False
        if self.zones and f"{pool.provider}/{pool.region}/{pool.zone or '-'}" not in self.zones:
            return False
        if self.market is not None and pool.market is not self.market:
            return False
        if self.accelerator and offer.accelerator != self.accelerator:
            return False
        return not self.instance_types or any(fnmatchcase(pool.instance_type, p) for p in self.instance_types)

    def units(self, offer: Offer) -> float | None:
        """What one node of ``offer`` uses of this quota (``None``: vCPUs not known)."""
        return float(offer.gpus) if self.unit is QuotaUnit.GPUS else offer.vcpus

    @property
    def label(self) -> str:
        """Short description: ``gcp/us-east4 spot H100 GPUs (PREEMPTIBLE_NVIDIA_H100_GPUS)``."""
        scope = "/".join(x for x in (self.provider, self.region) if x)
        scope += f" zones {'+'.join(self.zones)}" if self.zones else ""
        what = " ".join(
            x for x in (self.market.value if self.market else "", self.accelerator, ",".join(self.instance_types)) if x
        )
        unit = "GPUs" if self.unit is QuotaUnit.GPUS else "vCPUs"
        return f"{scope} {what + ' ' if what else ''}{unit}" + (f" ({self.name})" if self.name else "")


class InstanceState(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    STOPPED = "stopped"  # e.g. Vast outbid: paused, still billed for storage
    TERMINATED = "terminated"
    PREEMPTED = "preempted"  # taken back by the provider

    @property
    def alive(self) -> bool:
        return self in (InstanceState.PENDING, InstanceState.RUNNING)


class Instance(Frozen):
    """One machine as the provider reports it; providers are the source of truth.

    ``launched_at`` and ``ended_at`` are epoch seconds on the provider's clock.
    """

    id: str
    fleet: str
    pool: PoolKey
    state: InstanceState
    accelerator: str
    gpus: int
    price_per_hour: float
    launched_at: float
    ended_at: float | None = None
    reason: str = ""  # why it stopped or ended, where the provider says (Vast: "outbid")
    tags: dict[str, str] = Field(default_factory=dict)
    address: str = ""  # where other nodes of the fleet reach it (private IP), "" if not reported


class NodeConfig(Frozen):
    """What every node runs: image, startup command, environment, ssh key, and where its
    checkpoints go (``checkpoint_uri``, from the provider's ``ensure_bucket``; empty when the
    provider sets it itself, as the local cloud does).

    ``env`` holds resolved secrets at launch time, so it never appears in a repr or log line.

    ``spotfleet`` is where the node gets spotfleet (the spec's ``node.spotfleet``: ``ship``, a pip
    requirement or ``preinstalled``); for ``ship``, ``wheel_url`` (a short-lived read-only URL,
    ``fleet.provisioning.ship``), ``wheel_file`` and ``wheel_sha256`` name the shipped wheel."""

    image: str = ""
    startup: str = ""
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    ssh_key: str = ""
    checkpoint_uri: str = ""
    spotfleet: str = "ship"
    wheel_url: str = Field(default="", repr=False)
    wheel_file: str = ""
    wheel_sha256: str = ""


class LaunchRequest(Frozen):
    """Launch ``count`` instances of ``offer``'s pool for ``fleet``.

    ``token`` is the idempotency token (EC2 ClientToken, GCE requestId, deterministic
    names): the same token never creates instances twice. ``tags`` must be applied to
    every created resource; they always include the fleet and pool tags.
    ``max_price`` caps the spot price / Vast bid, ``None`` for the provider default.
    """

    fleet: str
    offer: Offer
    count: int = Field(gt=0)
    token: str
    tags: dict[str, str] = Field(default_factory=dict)
    node: NodeConfig = Field(default_factory=NodeConfig)
    max_price: float | None = None
    #: The low-latency group every node of this launch joins (``interconnect_group``), asked for
    #: by a zone-level coupled plan (``PlacementChoice.interconnect``); "" for none. An adapter
    #: whose provider has one (AWS cluster placement group, GCP compact placement policy, Azure
    #: proximity placement group) creates it in the pool's region when missing, tagged with the
    #: fleet, refuses one of that name the fleet did not create, and deletes it in ``teardown``;
    #: the others ignore it.
    interconnect: str = ""


class LaunchResult(Frozen):
    """What a launch created; partial success is normal.

    ``error`` explains the shortfall (``len(instances) < request.count``).
    """

    instances: tuple[Instance, ...]
    error_code: str = ""
    error_message: str = ""
    error_kind: str = ""  # "capacity" | "quota" | "auth" | "rate-limit" | "transient" | ""


class BilledRate(Frozen):
    """What a provider says it charges for one instance, read back after launch
    (``providers.base.ReadsBilledRate``).

    ``source`` says where the figure comes from, so a reader can weigh it: ``instance`` (the
    provider's own record of the instance: Vast ``dph_total``, RunPod ``costPerHr``),
    ``spot-history`` (EC2: the spot price of the instance's zone and type at launch),
    ``price-api`` (Azure Retail Prices, GCP Cloud Billing Catalog for the exact SKU and region),
    ``list`` (a published list price: on-demand EC2 from the catalog, Lambda, OCI).
    ``rental`` is the kind of rental the provider reports (``bid``/``on-demand`` on Vast,
    ``spot``/``on-demand`` elsewhere; ``""`` where it says none). ``at``: when it was read, on
    the provider's clock."""

    per_hour: float = Field(ge=0)
    source: str
    rental: str = ""
    at: float = 0.0


TAG_FLEET = "spotfleet:fleet"
TAG_POOL = "spotfleet:pool"
TAG_PLAN = "spotfleet:plan"
#: Set on head nodes only (value ``head``); a node without it is a worker.
TAG_ROLE = "spotfleet:role"
WORKER = "worker"
HEAD = "head"


def fleet_tags(fleet: str, pool: PoolKey, plan_id: str = "") -> dict[str, str]:
    """The tags every resource a fleet creates carries; discovery relies on them."""
    tags = {TAG_FLEET: fleet, TAG_POOL: pool.id}
    if plan_id:
        tags[TAG_PLAN] = plan_id
    return tags


def interconnect_group(fleet: str, domain: str) -> str:
    """The name of ``fleet``'s low-latency group in placement domain ``domain`` (a zone):
    stable across runs, and valid on every provider (lowercase letters, digits and hyphens,
    starting with a letter, 30 characters)."""
    return "spotfleet-" + hashlib.sha256(f"{fleet}\n{domain}".encode()).hexdigest()[:20]


def stable_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]
