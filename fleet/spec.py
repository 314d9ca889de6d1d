"""The fleet spec: one YAML document that says what capacity to hold and under which rules.

``load_spec(path)`` returns a validated ``FleetSpec`` or raises ``SpecError`` whose
message names every bad field by its path, the bad value, what is allowed, and the
YAML line it sits on. A minimal spec is five lines::

    name: quickstart
    backend: local
    capacity:
      gpus: 8
      accelerators: [H100]
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from fleet.accelerators import KNOWN, REFERENCE_WEIGHTS, canonical, unknown_message
from fleet.budget import DEFAULT_BILL_TOLERANCE, DEFAULT_CAP_ACTION
from fleet.errors import SpecError
from fleet.secrets import REF_NAME_RE, check_env, check_forwarding, references

if TYPE_CHECKING:
    import yaml

#: Accelerator names and reference throughput weights live in ``fleet.accelerators``.
DEFAULT_WEIGHTS = REFERENCE_WEIGHTS
KNOWN_ACCELERATORS = KNOWN
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$")
#: ``node.spotfleet`` values besides a pip requirement (``fleet.provisioning.ship``).
SHIP, PREINSTALLED = "ship", "preinstalled"
_REQUIREMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-\[\],<>=!~@+:/#&?%]{0,499}$")


class Strategy(str, Enum):
    PRICE_CAPACITY_OPTIMIZED = "price-capacity-optimized"
    LOWEST_PRICE = "lowest-price"
    CAPACITY_OPTIMIZED = "capacity-optimized"
    DIVERSIFIED = "diversified"


class Backend(str, Enum):
    """``local``: the embedded simulated cloud (no account). ``cloud``: the real providers."""

    LOCAL = "local"
    CLOUD = "cloud"


class WorkloadKind(str, Enum):
    INDEPENDENT = "independent"  # each node's loss costs only that node's work
    COUPLED = "coupled"  # one lost node stalls the whole job


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class NodeRange(Section):
    min: int = Field(default=1, ge=1, le=64)
    max: int = Field(default=8, ge=1, le=64)

    @model_validator(mode="after")
    def _ordered(self) -> NodeRange:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


def _or_list_of_names(schema: dict[str, Any], what: str, min_items: int = 1, null_values: bool = False) -> None:
    """Let a mapping field's JSON Schema also accept the shorthands its validator takes: a list
    of names (``accelerators: [H100]``, ``providers: [aws, gcp]``) and, with ``null_values``, a
    key with no value (``aws:``), so editors and ``fleet spec schema`` accept what ``fleet spec
    check`` accepts."""
    mapping = {k: schema.pop(k) for k in list(schema) if k not in ("title", "description")}
    if null_values and "additionalProperties" in mapping:
        mapping["additionalProperties"] = {"anyOf": [mapping["additionalProperties"], {"type": "null"}]}
    schema["anyOf"] = [
        mapping,
        {
            "type": "array",
            "items": {"type": "string"},
            "minItems": min_items,
            "description": f"shorthand: a list of {what}",
        },
    ]


class Capacity(Section):
    gpus: int = Field(gt=0, le=100_000, description="Target capacity: GPUs, each counted at its accelerator's weight.")
    accelerators: dict[str, float] = Field(
        description="Accepted accelerators: a list counts GPUs (every weight 1.0); a mapping gives each a "
        "relative throughput weight, e.g. {H200: 1.3, H100: 1.0}.",
        json_schema_extra=lambda schema: _or_list_of_names(schema, "accelerator names, e.g. [H100, H200]"),
    )
    gpus_per_node: NodeRange = Field(default_factory=NodeRange)
    on_demand_gpus: int = Field(default=0, ge=0, description="Baseline in weighted GPUs that must never be spot.")

    @field_validator("accelerators", mode="before")
    @classmethod
    def _list_means_default_weights(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            bad = [v for v in value if not isinstance(v, str)]
            if bad:
                raise ValueError(f"list entries must be accelerator names, got {bad[0]!r}")
            return {name: 1.0 for name in value}  # a list counts GPUs
        return value

    @field_validator("accelerators")
    @classmethod
    def _known_accelerators(cls, value: dict[str, float]) -> dict[str, float]:
        if not value:
            raise ValueError("list at least one accelerator, e.g. [H100, H200]")
        out: dict[str, float] = {}
        for name, weight in value.items():
            canon = canonical(name)
            if canon is None:
                raise ValueError(unknown_message(name))
            if not (0 < weight <= 100):
                raise ValueError(f"weight of {name} must be in (0, 100], got {weight}")
            out[canon] = float(weight)
        return out

    @model_validator(mode="after")
    def _baseline_within_target(self) -> Capacity:
        if self.on_demand_gpus > self.gpus:
            raise ValueError(
                f"on_demand_gpus ({self.on_demand_gpus}) exceeds gpus ({self.gpus}); "
                "the on-demand baseline is part of the target"
            )
        return self


class Budget(Section):
    """What the fleet may cost. The plan keeps within ``max_per_hour`` and ``max_per_gpu_hour``;
    what the providers then bill (read back after each launch) is held to the plan by
    ``bill_tolerance`` and ``max_per_node``: an instance billed above its planned price by more
    than the tolerance, above the per-node cap, or rented on-demand where a bid was meant (Vast)
    gets ``cap_action``: ``warn`` (an event and a line in ``fleet status``), ``replace`` (the
    rebalancer launches a replacement, then terminates it) or ``destroy`` (terminated at once;
    the rebalancer replaces the capacity from the pools it would use anyway)."""

    max_per_hour: float | None = Field(default=None, gt=0, description="Fleet-wide cap in USD per hour.")
    max_per_gpu_hour: float | None = Field(default=None, gt=0, description="Skip offers above this USD per GPU-hour.")
    cap_action: Literal["warn", "replace", "destroy"] = Field(
        default=DEFAULT_CAP_ACTION,
        description="What happens to an instance billed over its plan or the per-node cap: "
        "warn, replace (make before break) or destroy.",
    )
    bill_tolerance: float = Field(
        default=DEFAULT_BILL_TOLERANCE,
        ge=0,
        le=10,
        description="How far above its planned price an "
        "instance may bill before cap_action applies, as a fraction (0.10 = 10%).",
    )
    max_per_node: float | None = Field(
        default=None, gt=0, description="Hard cap in USD per hour for what any one instance bills."
    )


class VastBid(Section):
    """Vast.ai interruptible bid: ``margin`` over the host's ``min_bid``, never above
    ``max_fraction_of_on_demand`` of its on-demand price."""

    margin: float = Field(default=0.15, ge=0, le=5)
    max_fraction_of_on_demand: float = Field(default=0.9, gt=0, le=1)


class ProviderSettings(Section):
    """What every provider's settings have: which regions, zones and markets it may use.

    Each provider owns a subclass with its own keys (``providers/<name>/settings.py``, named by
    its registration record); a key of another provider is refused, naming the field and the fix.
    """

    enabled: bool = True
    regions: list[str] | None = Field(default=None, description="Allowed regions; omit for all.")
    exclude_regions: list[str] = Field(default_factory=list)
    zones: list[str] | None = Field(default=None, description="Allowed zones; omit for all.")
    exclude_zones: list[str] = Field(default_factory=list)
    spot: bool = True
    on_demand: bool = True

    @field_validator("regions", "zones")
    @classmethod
    def _not_empty(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("an empty list allows nothing; omit the key to allow all, or set enabled: false")
        return value

    def allows(self, region: str, zone: str) -> bool:
        if self.regions is not None and region not in self.regions:
            return False
        if region in self.exclude_regions:
            return False
        if zone and self.zones is not None and zone not in self.zones:
            return False
        return not (zone and zone in self.exclude_zones)


#: How every diversification share is measured (schema text and docs/concepts.md say the same).
SHARE_RULE = (
    " A share is of the plan's spot part, the target minus the on-demand weighted GPUs the plan"
    " holds, and never less than the smallest spot node on offer."
)


class Diversification(Section):
    max_pool_share: float = Field(
        default=0.5, gt=0, le=1, description=("Max share of the spot part in one pool." + SHARE_RULE)
    )
    min_pools: int = Field(default=1, ge=1, le=1000, description="Minimum number of spot pools used.")
    max_zone_share: float = Field(
        default=0.5, gt=0, le=1, description=("Max share of the spot part in one zone (1 = no zone cap)." + SHARE_RULE)
    )
    max_region_share: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description=("Max share of the spot part in one region (1 = no region cap)." + SHARE_RULE),
    )
    max_provider_share: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description=("Max share of the spot part with one provider (1 = no provider cap)." + SHARE_RULE),
    )


class Workload(Section):
    kind: WorkloadKind = WorkloadKind.INDEPENDENT
    checkpoint_write_seconds: float = Field(default=60, ge=0, le=86_400)
    restart_seconds: float = Field(default=300, ge=0, le=86_400)


# ---- placement of coupled work ------------------------------------------------------------
class Placement(str, Enum):
    """The failure domain every node of the fleet must share: one ``zone``, one ``region``, one
    ``provider``, or ``any`` (no rule). A synchronous (coupled) job cannot span slow links,
    so its default is ``region``; independent nodes default to ``any``. Diversification caps
    at the placement level or coarser cannot hold (all nodes sit in one such domain): the
    default zone cap is then off, and setting one explicitly is an error."""

    ZONE = "zone"
    REGION = "region"
    PROVIDER = "provider"
    ANY = "any"


PLACEMENT_DESCRIPTION = (
    "Domain all nodes share: zone, region, provider or any; default region for "
    "workload.kind coupled, any for independent. A zone-level coupled plan asks for "
    "the provider's interconnect (cluster placement group, compact placement, "
    "proximity placement group)."
)
#: Placement levels from finest to coarsest; a cap at a level from ``placement``'s on is off.
PLACEMENT_LEVELS = ("zone", "region", "provider")


class Checkpoint(Section):
    provider: Literal["s3", "gcs", "azure", "local"] = "local"
    bucket: str = Field(default="", description="Bucket/container; default <fleet>-checkpoints.")
    region: str = ""
    prefix: str = ""
    keep_last: int = Field(default=3, ge=1, le=1000)
    expire_days: int | None = Field(default=None, ge=1)


class Node(Section):
    image: str = ""
    startup: str = ""
    env: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Environment of every node. Secrets are references resolved at launch: ${env:NAME} "
            "(see fleet.secrets); a secret-looking name with a literal value is refused."
        ),
    )
    forward_credentials: list[str] = Field(
        default_factory=list,
        description=(
            "Credential variables (AWS_*, GOOGLE_*, AZURE_*, VAST_API_KEY, SPOTFLEET_*... see fleet.secrets) that "
            "node.env and head.env may refer to; any other reference to one is refused."
        ),
    )
    ssh_key: str = ""
    spotfleet: str = Field(
        default=SHIP,
        description=(
            "How nodes get spotfleet: ship (default: a wheel of the spotfleet that runs `fleet up`, "
            "stored in the fleet's checkpoint bucket), a pip requirement (a published version, e.g. "
            "'spotfleet[s3]==0.1.0', or a VCS URL, e.g. 'git+https://host/spotfleet.git@v0.1.0'), or "
            "preinstalled (the image has it)."
        ),
    )

    @field_validator("forward_credentials")
    @classmethod
    def _credential_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not REF_NAME_RE.fullmatch(name):
                raise ValueError(f"{name!r} is not a variable name; list names such as AWS_SECRET_ACCESS_KEY")
        return value

    @model_validator(mode="after")
    def _credentials_forwarded_on_purpose(self) -> Node:
        check_forwarding(self.env, self.forward_credentials, "env")
        return self

    @field_validator("env")
    @classmethod
    def _secrets_by_reference(cls, value: dict[str, str]) -> dict[str, str]:
        check_env(value)
        return value

    @field_validator("spotfleet")
    @classmethod
    def _spotfleet_source(cls, value: str) -> str:
        value = value.strip()
        if value in (SHIP, PREINSTALLED):
            return value
        if not _REQUIREMENT_RE.match(value) or not (value.lower().startswith("spotfleet") or "://" in value):
            raise ValueError(
                f"use {SHIP!r}, {PREINSTALLED!r} or a pip requirement for spotfleet, e.g. "
                "'spotfleet[s3]==0.1.0' or 'git+https://host/spotfleet.git@v0.1.0'"
            )
        return value


class Head(Section):
    """The head role: nodes that coordinate the workers (a scheduler, a task queue, a Ray head,
    a rendezvous host). Always on-demand, launched before the workers; every worker gets its
    address as ``SPOTFLEET_HEAD_ADDR`` (and ``SPOTFLEET_HEAD_PORT`` when ``port`` is set).
    ``provider``/``region`` pin it; by default it goes next to the largest worker share."""

    count: int = Field(default=1, ge=1, le=16, description="Head nodes (all on-demand).")
    vcpus: float = Field(default=2, ge=0, le=1024, description="Least vCPUs per head node.")
    memory_gib: float = Field(default=4, ge=0, le=16_384, description="Least memory per head node, GiB.")
    gpus: int = Field(default=0, ge=0, le=16, description="Least GPUs per head node (0: CPU-only is fine).")
    provider: str = Field(default="", description="Pin the head to this provider; default: next to the workers.")
    region: str = Field(default="", description="Pin the head to this region; default: next to the workers.")
    port: int | None = Field(default=None, ge=1, le=65_535, description="Port the head serves on, given to workers.")
    ready_timeout_seconds: float = Field(
        default=600, gt=0, le=86_400, description="How long `fleet up` waits for the head to run."
    )
    image: str = ""
    startup: str = ""
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment of the head nodes (secrets by reference)."
    )

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        known = known_providers()
        if value and value not in known:
            raise ValueError(f"unknown provider {value!r} (known: {', '.join(known)})")
        return value

    @field_validator("env")
    @classmethod
    def _secrets_by_reference(cls, value: dict[str, str]) -> dict[str, str]:
        check_env(value)
        return value


class LocalCloud(Section):
    """Settings of the embedded simulated cloud."""

    time_scale: float = Field(default=60.0, gt=0, le=1_000_000, description="Simulated seconds per real second.")
    seed: int = 0


class Rebalance(Section):
    """How ``fleet rebalance`` keeps the fleet at target (all times on the provider's clock).

    ``critical_gpus`` is the weighted-GPU level that must stay up even when spot cannot be
    had: when spot is short, on-demand fills up to it and no further (at least the
    on-demand baseline; at most the target). The rest tunes how calmly the fleet moves.
    """

    critical_gpus: int | None = Field(
        default=None,
        ge=0,
        description="Weighted GPUs kept up with on-demand when spot is short; default: the on-demand baseline.",
    )
    backoff_seconds: float = Field(
        default=600, gt=0, le=86_400, description="Avoid a pool this long after it interrupted us or had no capacity."
    )
    backoff_max_seconds: float = Field(
        default=6 * 3600,
        gt=0,
        le=7 * 86_400,
        description="Cap of the back-off, which doubles per event in backoff_memory.",
    )
    backoff_memory_seconds: float = Field(
        default=24 * 3600, gt=0, le=30 * 86_400, description="Events older than this no longer lengthen a back-off."
    )
    min_saving: float = Field(
        default=0.2, ge=0, le=1, description="Return from on-demand to spot only when it saves this fraction."
    )
    min_fallback_age_seconds: float = Field(
        default=1800, ge=0, le=7 * 86_400, description="An on-demand fallback node runs at least this long."
    )
    max_moves_per_pass: int = Field(
        default=2, ge=0, le=1000, description="Disruption budget: on-demand nodes returned to spot per pass."
    )
    return_cooldown_seconds: float = Field(
        default=0, ge=0, le=7 * 86_400, description="Wait this long after a return before the next one."
    )
    prior_hours: float = Field(
        default=100, gt=0, le=1_000_000, description="Weight of the catalog's interruption estimate, in instance-hours."
    )
    hedge: bool = Field(
        default=False,
        description=(
            "Hold spare spot capacity (the expected loss within one cold start, at least one node) and "
            "keep every zone at or below the spares."
        ),
    )
    cold_start_seconds: float = Field(
        default=600,
        ge=0,
        le=86_400,
        description="How long a new node takes to do work (sizes the hedge; see charge_cold_start).",
    )
    charge_cold_start: bool = Field(
        default=False,
        description=(
            "Price a pool's learned interruptions at workload.restart_seconds plus cold_start_seconds (a lost "
            "node's replacement boots first), so the rebalancer leaves zones that drop often; fleet plan is unchanged."
        ),
    )
    spot_moves: bool = Field(
        default=False,
        description=("Move spot nodes to a cheaper spot pool (make before break) on the terms of returns to spot."),
    )
    bridge: bool = Field(
        default=False,
        description=(
            "Cover capacity that is lost or still starting with on-demand at once (up to critical_gpus), "
            "released as soon as the ready rest covers the target."
        ),
    )
    interruption_queue: bool = Field(
        default=False,
        description=(
            "AWS: the fleet gets an SQS queue fed by EventBridge rules for spot interruption warnings, rebalance "
            "recommendations and state changes, which `fleet rebalance --watch` reads to act within seconds; "
            "`fleet down` deletes them. Needs sqs:* and events:* permissions on spotfleet-* names."
        ),
    )


class FleetSpec(Section):
    name: str
    backend: Backend = Backend.CLOUD
    capacity: Capacity
    budget: Budget = Field(default_factory=Budget)
    providers: dict[str, SerializeAsAny[ProviderSettings]] = Field(
        default_factory=dict,
        description="Per-provider settings; omit to allow every provider.",
        json_schema_extra=lambda schema: _or_list_of_names(
            schema, "provider names, e.g. [aws, gcp]", min_items=0, null_values=True
        ),
    )
    diversification: Diversification = Field(default_factory=Diversification)
    strategy: Strategy = Strategy.PRICE_CAPACITY_OPTIMIZED
    workload: Workload = Field(default_factory=Workload)
    placement: Placement | None = Field(default=None, description=PLACEMENT_DESCRIPTION)
    checkpoint: Checkpoint = Field(default_factory=Checkpoint)
    node: Node = Field(default_factory=Node)
    head: Head | None = Field(default=None, description="Optional head role on on-demand; `capacity` is the workers.")
    local: LocalCloud = Field(default_factory=LocalCloud)
    rebalance: Rebalance = Field(default_factory=Rebalance)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError("use 2-40 lowercase letters, digits and dashes, starting with a letter")
        return value

    @field_validator("providers", mode="wrap")
    @classmethod
    def _providers(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Each provider's settings are read by its own model (``settings_model``)."""
        if isinstance(value, list):  # `providers: [aws, gcp]` shorthand
            if not all(isinstance(name, str) for name in value):
                raise ValueError("list entries must be provider names, e.g. [aws, gcp]")
            value = {name: {} for name in value}
        if isinstance(value, dict):
            known = known_providers()
            for name in value:
                if name not in known:
                    hint = difflib.get_close_matches(str(name), known, n=1)
                    extra = f"; did you mean {hint[0]!r}?" if hint else ""
                    raise ValueError(f"unknown provider {name!r}{extra} (known: {', '.join(known)})")
            value = _provider_settings({k: ({} if v is None else v) for k, v in value.items()})
        return handler(value)

    @model_validator(mode="after")
    def _some_provider(self) -> FleetSpec:
        if self.providers and not any(p.enabled for p in self.providers.values()):
            raise ValueError("every provider is disabled; enable at least one")
        return self

    @model_validator(mode="after")
    def _critical_between_baseline_and_target(self) -> FleetSpec:
        crit = self.rebalance.critical_gpus
        if crit is not None and not (self.capacity.on_demand_gpus <= crit <= self.capacity.gpus):
            raise ValueError(
                f"rebalance.critical_gpus ({crit}) must lie between capacity.on_demand_gpus "
                f"({self.capacity.on_demand_gpus}) and capacity.gpus ({self.capacity.gpus})"
            )
        return self

    @model_validator(mode="after")
    def _credentials_forwarded_on_purpose(self) -> FleetSpec:
        allowed = self.node.forward_credentials  # node.env is checked by Node (its error names the line)
        if self.head is not None:
            check_forwarding(self.head.env, allowed, "head.env")
        used = {
            ref
            for env in (self.node.env, self.head.env if self.head else {})
            for refs in references(env).values()
            for ref in refs
        }
        for name in allowed:
            if name not in used:
                raise ValueError(
                    f"node.forward_credentials names {name}, which neither node.env nor head.env "
                    f"refers to; remove it or refer to it as ${{env:{name}}}"
                )
        return self

    @model_validator(mode="after")
    def _head_pin_allowed(self) -> FleetSpec:
        pin = self.head.provider if self.head else ""
        if pin and self.providers and self.provider_settings(pin) is None:
            raise ValueError(
                f"head.provider {pin!r} is not among the enabled providers; enable it under `providers` or drop the pin"
            )
        return self

    @model_validator(mode="after")
    def _caps_fit_placement(self) -> FleetSpec:
        level = self.placement_level
        if level == "any":
            return self
        d = self.diversification
        for lv in PLACEMENT_LEVELS[PLACEMENT_LEVELS.index(level) :]:
            share = getattr(d, f"max_{lv}_share")
            if share < 1 and f"max_{lv}_share" in d.model_fields_set:
                raise ValueError(
                    f"diversification.max_{lv}_share {share:g} cannot hold with placement {level} "
                    f"(every node shares one {level}); drop it, or set placement to a level above {lv}"
                )
        return self

    @property
    def placement_level(self) -> str:
        """``placement`` with its default filled in: ``region`` for coupled work, else ``any``."""
        if self.placement is not None:
            return self.placement.value
        return Placement.REGION.value if self.workload.kind is WorkloadKind.COUPLED else Placement.ANY.value

    @property
    def critical_gpus(self) -> float:
        """Weighted GPUs on-demand may fill when spot is short (never below the baseline)."""
        crit = self.rebalance.critical_gpus
        return float(self.capacity.on_demand_gpus if crit is None else crit)

    # ---- derived views used by the planner -------------------------------------------
    def provider_settings(self, provider: str) -> ProviderSettings | None:
        """Settings for ``provider`` (its own model), defaults when none are listed, ``None`` if not allowed."""
        if not self.providers:
            return settings_model(provider)()
        settings = self.providers.get(provider)
        return settings if settings is not None and settings.enabled else None

    def weight(self, accelerator: str) -> float:
        return self.capacity.accelerators.get(accelerator, 0.0)

    @property
    def bucket(self) -> str:
        return self.checkpoint.bucket or f"{self.name}-checkpoints"

    def spec_hash(self) -> str:
        data = self.model_dump(mode="json")
        for path, unset in _ADDED_LATER:  # a spec that leaves them unset hashes as it always did
            parent = data
            for key in path[:-1]:
                parent = parent.get(key) or {}
            if path[-1] in parent and unset(parent[path[-1]]):
                parent.pop(path[-1])
        body = json.dumps(data, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]


#: Fields added after specs were first hashed, each with the test for "left at its default": a spec
#: that leaves them so keeps the hash it had before the field existed (so a running fleet's
#: recorded spec still matches its file).
_ADDED_LATER: tuple[tuple[tuple[str, ...], Callable[[Any], bool]], ...] = (
    (("head",), lambda v: v is None),
    (("placement",), lambda v: v is None),
    (("node", "forward_credentials"), lambda v: not v),
    (("node", "spotfleet"), lambda v: v == SHIP),
    (("rebalance", "interruption_queue"), lambda v: not v),
    (("rebalance", "charge_cold_start"), lambda v: not v),
    (("budget", "cap_action"), lambda v: v == DEFAULT_CAP_ACTION),
    (("budget", "bill_tolerance"), lambda v: v == DEFAULT_BILL_TOLERANCE),
    (("budget", "max_per_node"), lambda v: v is None),
)


# ---- each provider's own settings model ----------------------------------------------------


def settings_models() -> dict[str, type[ProviderSettings]]:
    """Provider name -> its settings model, from the providers' registration records
    (``providers.registry``; read when a spec is, so a provider is named in one place)."""
    from providers.registry import settings_models as from_records

    return from_records()


def known_providers() -> tuple[str, ...]:
    """Every provider a spec may name (no provider package is imported to say so)."""
    from providers.registry import names

    return names()


def settings_model(provider: str) -> type[ProviderSettings]:
    """``provider``'s settings model (the shared base for a name no record declares); only that
    provider's package is imported, so reading a spec imports the providers it names."""
    from providers.registry import settings_model as from_record

    return from_record(provider) or ProviderSettings


def _provider_settings(value: dict[str, Any]) -> dict[str, ProviderSettings]:
    """Read each provider's settings with its own model; every problem is reported at once, a key
    another provider takes naming that provider (``providers.aws.project``: a gcp setting)."""
    from pydantic_core import InitErrorDetails, PydanticCustomError

    out: dict[str, ProviderSettings] = {}
    problems: list[InitErrorDetails] = []
    for name, raw in value.items():
        model = settings_model(name)
        if isinstance(raw, model):
            out[name] = raw
            continue
        try:
            out[name] = model.model_validate(raw.model_dump() if isinstance(raw, ProviderSettings) else raw)
        except ValidationError as err:
            for e in err.errors():
                loc = (name, *e["loc"])
                if e["type"] == "extra_forbidden" and len(e["loc"]) == 1:
                    problems.append(
                        InitErrorDetails(
                            type=PydanticCustomError(
                                "provider_setting", _foreign_key(name, str(e["loc"][0]), model, settings_models())
                            ),
                            loc=loc,
                            input=e["input"],
                        )
                    )
                else:
                    problems.append(InitErrorDetails(type=e["type"], loc=loc, input=e["input"], ctx=e.get("ctx") or {}))
    if problems:
        raise ValidationError.from_exception_data("providers", problems)
    return out


def _foreign_key(name: str, key: str, model: type[ProviderSettings], models: dict[str, type[ProviderSettings]]) -> str:
    from fleet.spec_input import short

    owners = [other for other, m in models.items() if other != name and key in m.model_fields]
    if owners:
        return (
            f"{short(key)} is a setting of {' and '.join(owners)}, not of {name}: move it under "
            f"providers.{owners[0]} or remove it"
        )
    fields = sorted(model.model_fields)
    hint = difflib.get_close_matches(key, fields, n=1)
    fix = f"did you mean {hint[0]!r}?" if hint else f"{name} settings are: {', '.join(fields)}"
    return f"unknown {name} setting {short(key)}; {fix}"


# ---- loading and error reporting ---------------------------------------------------------


def json_schema() -> dict[str, Any]:
    """JSON Schema of the spec, for editors (``fleet spec schema``)."""
    schema = FleetSpec.model_json_schema()
    providers = schema["properties"]["providers"]["anyOf"][0]
    providers.pop("additionalProperties", None)
    providers["additionalProperties"] = False
    providers["properties"] = {}
    for name, model in settings_models().items():
        sub = model.model_json_schema(ref_template="#/$defs/{model}")
        for key, definition in sub.pop("$defs", {}).items():
            schema.setdefault("$defs", {})[key] = definition
        schema.setdefault("$defs", {})[model.__name__] = sub
        providers["properties"][name] = {"anyOf": [{"$ref": f"#/$defs/{model.__name__}"}, {"type": "null"}]}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "spotfleet fleet spec"
    return schema


def load_spec(path: str | Path) -> FleetSpec:
    """Read and validate a spec file; every problem is reported in one ``SpecError``.

    Only a regular UTF-8 file of bounded size is read (``fleet.spec_input``)."""
    from fleet.spec_input import read_spec_text

    path = Path(path)
    return parse_spec(read_spec_text(path), source=str(path))


def parse_spec(text: str, source: str = "<spec>") -> FleetSpec:
    """Validate spec text; hostile YAML (alias bombs, deep nesting, duplicate keys) is a ``SpecError``."""
    import yaml  # YAML is read only here: commands that only read the record start faster

    from fleet.spec_input import load_yaml, short

    try:
        node, data = load_yaml(text, source)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SpecError([("", f"YAML syntax error at {where}{short(err.problem)[1:-1]}")], source) from None
    except yaml.YAMLError as err:
        raise SpecError([("", f"YAML syntax error: {short(str(err))[1:-1]}")], source) from None
    if not isinstance(data, dict):
        raise SpecError([("", "the spec must be a mapping with at least `name` and `capacity`")], source)
    try:
        return FleetSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(_problems(err, node), source) from None


#: At most this many problems are listed (the rest are counted), each at most MAX_LINE characters.
MAX_PROBLEMS = 20
MAX_LINE = 300


def _problems(err: ValidationError, root: yaml.Node | None) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    errors = err.errors()
    for e in errors[:MAX_PROBLEMS]:
        loc = _clean_loc(e["loc"])
        path = _dotted(loc)
        line = _line_of(root, loc)
        where = f" (line {line})" if line else ""
        message = _message(e, loc)
        message = message if len(message) <= MAX_LINE else message[:MAX_LINE] + "..."
        problems.append((path if len(path) <= 100 else path[:100] + "...", message + where))
    if len(errors) > MAX_PROBLEMS:
        problems.append(("", f"... and {len(errors) - MAX_PROBLEMS} more problem(s)"))
    return problems


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    # pydantic adds "[key]" markers for dict keys and function-validator names; drop them
    return tuple(p for p in loc if not (isinstance(p, str) and p.startswith(("function-", "[key]"))))


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _message(e: Mapping[str, Any], loc: tuple[Any, ...]) -> str:
    from fleet.spec_input import short

    kind = e["type"]
    value = e.get("input")
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        fields = sorted(model.model_fields) if model else []
        hint = difflib.get_close_matches(str(loc[-1]), fields, n=1)
        extra = f"; did you mean {hint[0]!r}?" if hint else (f" (allowed: {', '.join(fields)})" if fields else "")
        return f"unknown key {short(loc[-1])}{extra}"
    if kind == "missing":
        return "is required"
    if kind in ("enum", "literal_error"):
        expected = e.get("ctx", {}).get("expected", "")
        return f"{short(value)} is not allowed; use one of {expected}"
    msg = e["msg"]
    msg = msg.removeprefix("Value error, ")
    if kind == "value_error" and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return f"{msg}; got {short(value)}"
    if kind.endswith(("_type", "_parsing")) or kind.startswith(("greater", "less")):
        return f"{msg}, got {short(value)}"
    return msg


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The spec section model found at ``loc`` (``providers.<name>`` is ProviderSettings)."""
    model: type[BaseModel] = FleetSpec
    i = 0
    while i < len(loc):
        if model is FleetSpec and loc[i] == "providers":
            if i + 1 >= len(loc):
                return None
            model, i = settings_model(str(loc[i + 1])), i + 2
            continue
        field = model.model_fields.get(loc[i]) if isinstance(loc[i], str) else None
        ann = field.annotation if field else None
        ann = Head if ann == (Head | None) else ann
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        model, i = ann, i + 1
    return model


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based YAML line of the deepest node on ``loc`` that exists."""
    import yaml

    best = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for key, value in node.value:
                if key.value == str(part):
                    nxt = (key, value)
                    break
            if nxt is None:
                return best
            best = nxt[0].start_mark.line + 1
            node = nxt[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            best = node.start_mark.line + 1
        else:
            return best
    return best
