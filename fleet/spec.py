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
from enum import Enum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fleet.errors import SpecError

#: Relative training throughput per GPU (H100 = 1.0), used when a spec lists
#: accelerators without weights. Rough dense BF16 ratios; override them in the spec.
DEFAULT_WEIGHTS: dict[str, float] = {
    "B200": 2.2, "H200": 1.3, "GH200": 1.15, "H100": 1.0, "H100-MEGA": 1.0, "H100-NVL": 0.95,
    "MI300X": 1.0, "A100-80GB": 0.6, "A100-40GB": 0.55, "L40S": 0.45, "L40": 0.35,
    "RTX6000-ADA": 0.4, "RTX5090": 0.4, "RTX4090": 0.3, "RTX4080": 0.2, "A6000": 0.25,
    "A5000": 0.18, "A4500": 0.15, "A4000": 0.12, "A40": 0.25, "A10G": 0.15, "A10": 0.15,
    "L4": 0.15, "RTX4000-ADA": 0.1, "RTX3090": 0.18, "RTX3060": 0.06, "RTX6000": 0.1,
    "V100-32GB": 0.2, "V100": 0.18, "T4": 0.06, "T4G": 0.05, "P100": 0.08, "P4": 0.03,
    "K80": 0.02, "M60": 0.02, "V520": 0.03, "MI25": 0.04,
}
KNOWN_ACCELERATORS = frozenset(DEFAULT_WEIGHTS)
KNOWN_PROVIDERS = ("aws", "gcp", "azure", "vast", "lambda", "runpod")
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$")


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
    INDEPENDENT = "independent"   # each node's loss costs only that node's work
    COUPLED = "coupled"           # one lost node stalls the whole job


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeRange(Section):
    min: int = Field(default=1, ge=1, le=64)
    max: int = Field(default=8, ge=1, le=64)

    @model_validator(mode="after")
    def _ordered(self) -> "NodeRange":
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class Capacity(Section):
    gpus: int = Field(gt=0, le=100_000, description="Target capacity in weighted GPUs (H100 = 1.0).")
    accelerators: dict[str, float] = Field(
        description="Accepted accelerators and their relative throughput weights; a list uses default weights."
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
            return {name: DEFAULT_WEIGHTS.get(name.upper(), 1.0) for name in value}
        return value

    @field_validator("accelerators")
    @classmethod
    def _known_accelerators(cls, value: dict[str, float]) -> dict[str, float]:
        if not value:
            raise ValueError("list at least one accelerator, e.g. [H100, H200]")
        out: dict[str, float] = {}
        for name, weight in value.items():
            canon = name.upper()
            if canon not in KNOWN_ACCELERATORS:
                hint = difflib.get_close_matches(canon, sorted(KNOWN_ACCELERATORS), n=1)
                extra = f"; did you mean {hint[0]!r}?" if hint else f"; known: {', '.join(sorted(KNOWN_ACCELERATORS))}"
                raise ValueError(f"unknown accelerator {name!r}{extra}")
            if not (0 < weight <= 100):
                raise ValueError(f"weight of {name} must be in (0, 100], got {weight}")
            out[canon] = float(weight)
        return out

    @model_validator(mode="after")
    def _baseline_within_target(self) -> "Capacity":
        if self.on_demand_gpus > self.gpus:
            raise ValueError(
                f"on_demand_gpus ({self.on_demand_gpus}) exceeds gpus ({self.gpus}); "
                "the on-demand baseline is part of the target"
            )
        return self


class Budget(Section):
    max_per_hour: float | None = Field(default=None, gt=0, description="Fleet-wide cap in USD per hour.")
    max_per_gpu_hour: float | None = Field(default=None, gt=0, description="Skip offers above this USD per GPU-hour.")


class VastBid(Section):
    """Vast.ai interruptible bid: ``margin`` over the host's ``min_bid``, never above
    ``max_fraction_of_on_demand`` of its on-demand price."""

    margin: float = Field(default=0.15, ge=0, le=5)
    max_fraction_of_on_demand: float = Field(default=0.9, gt=0, le=1)


class ProviderSettings(Section):
    enabled: bool = True
    regions: list[str] | None = Field(default=None, description="Allowed regions; omit for all.")
    exclude_regions: list[str] = Field(default_factory=list)
    zones: list[str] | None = Field(default=None, description="Allowed zones; omit for all.")
    exclude_zones: list[str] = Field(default_factory=list)
    spot: bool = True
    on_demand: bool = True
    # AWS
    subnets: dict[str, str] = Field(default_factory=dict, description="AWS: zone -> subnet id.")
    ami: str = ""
    # GCP
    project: str = ""
    # Azure
    subscription_id: str = ""
    resource_group: str = ""
    # Vast
    bid: VastBid = Field(default_factory=VastBid)
    min_reliability: float = Field(default=0.95, ge=0, le=1)

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


#: How every diversification share is measured (schema text and README say the same).
SHARE_RULE = (" A share is of the plan's spot part, the target minus the on-demand weighted GPUs the plan"
              " holds, and never less than the smallest spot node on offer.")


class Diversification(Section):
    max_pool_share: float = Field(default=0.5, gt=0, le=1, description=(
        "Max share of the spot part in one pool." + SHARE_RULE))
    min_pools: int = Field(default=1, ge=1, le=1000, description="Minimum number of spot pools used.")
    max_zone_share: float = Field(default=0.5, gt=0, le=1, description=(
        "Max share of the spot part in one zone (1 = no zone cap)." + SHARE_RULE))
    max_region_share: float = Field(default=1.0, gt=0, le=1, description=(
        "Max share of the spot part in one region (1 = no region cap)." + SHARE_RULE))
    max_provider_share: float = Field(default=1.0, gt=0, le=1, description=(
        "Max share of the spot part with one provider (1 = no provider cap)." + SHARE_RULE))


class Workload(Section):
    kind: WorkloadKind = WorkloadKind.INDEPENDENT
    checkpoint_write_seconds: float = Field(default=60, ge=0, le=86_400)
    restart_seconds: float = Field(default=300, ge=0, le=86_400)


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
    env: dict[str, str] = Field(default_factory=dict)
    ssh_key: str = ""


class LocalCloud(Section):
    """Settings of the embedded simulated cloud."""

    time_scale: float = Field(default=60.0, gt=0, le=1_000_000, description="Simulated seconds per real second.")
    seed: int = 0


class FleetSpec(Section):
    name: str
    backend: Backend = Backend.CLOUD
    capacity: Capacity
    budget: Budget = Field(default_factory=Budget)
    providers: dict[str, ProviderSettings] = Field(
        default_factory=dict, description="Per-provider settings; omit to allow every provider."
    )
    diversification: Diversification = Field(default_factory=Diversification)
    strategy: Strategy = Strategy.PRICE_CAPACITY_OPTIMIZED
    workload: Workload = Field(default_factory=Workload)
    checkpoint: Checkpoint = Field(default_factory=Checkpoint)
    node: Node = Field(default_factory=Node)
    local: LocalCloud = Field(default_factory=LocalCloud)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError("use 2-40 lowercase letters, digits and dashes, starting with a letter")
        return value

    @field_validator("providers", mode="before")
    @classmethod
    def _providers(cls, value: Any) -> Any:
        if isinstance(value, list):  # `providers: [aws, gcp]` shorthand
            value = {name: {} for name in value}
        if isinstance(value, dict):
            for name in value:
                if name not in KNOWN_PROVIDERS:
                    hint = difflib.get_close_matches(str(name), KNOWN_PROVIDERS, n=1)
                    extra = f"; did you mean {hint[0]!r}?" if hint else ""
                    raise ValueError(f"unknown provider {name!r}{extra} (known: {', '.join(KNOWN_PROVIDERS)})")
            value = {k: ({} if v is None else v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _some_provider(self) -> "FleetSpec":
        if self.providers and not any(p.enabled for p in self.providers.values()):
            raise ValueError("every provider is disabled; enable at least one")
        return self

    # ---- derived views used by the planner -------------------------------------------
    def provider_settings(self, provider: str) -> ProviderSettings | None:
        """Settings for ``provider``, defaults when none are listed, ``None`` if not allowed."""
        if not self.providers:
            return ProviderSettings()
        settings = self.providers.get(provider)
        return settings if settings is not None and settings.enabled else None

    def weight(self, accelerator: str) -> float:
        return self.capacity.accelerators.get(accelerator, 0.0)

    @property
    def bucket(self) -> str:
        return self.checkpoint.bucket or f"{self.name}-checkpoints"

    def spec_hash(self) -> str:
        body = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]


# ---- loading and error reporting ---------------------------------------------------------

def json_schema() -> dict[str, Any]:
    """JSON Schema of the spec, for editors (``fleet spec schema``)."""
    schema = FleetSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "spotfleet fleet spec"
    return schema


def load_spec(path: str | Path) -> FleetSpec:
    """Read and validate a spec file; every problem is reported in one ``SpecError``."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError([("", f"no such file: {path}")]) from None
    except OSError as err:
        raise SpecError([("", f"cannot read {path}: {err.strerror}")]) from None
    return parse_spec(text, source=str(path))


def parse_spec(text: str, source: str = "<spec>") -> FleetSpec:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SpecError([("", f"YAML syntax error at {where}{err.problem}")], source) from None
    except yaml.YAMLError as err:
        raise SpecError([("", f"YAML syntax error: {err}")], source) from None
    if not isinstance(data, dict):
        raise SpecError([("", "the spec must be a mapping with at least `name` and `capacity`")], source)
    try:
        return FleetSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(_problems(err, node), source) from None


def _problems(err: ValidationError, root: yaml.Node | None) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for e in err.errors():
        loc = _clean_loc(e["loc"])
        path = _dotted(loc)
        line = _line_of(root, loc)
        where = f" (line {line})" if line else ""
        problems.append((path, _message(e, loc) + where))
    return problems


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    # pydantic adds "[key]" markers for dict keys and function-validator names; drop them
    return tuple(p for p in loc if not (isinstance(p, str) and p.startswith(("function-", "[key]"))))


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _message(e: dict[str, Any], loc: tuple[Any, ...]) -> str:
    kind = e["type"]
    value = e.get("input")
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        fields = sorted(model.model_fields) if model else []
        hint = difflib.get_close_matches(str(loc[-1]), fields, n=1)
        extra = f"; did you mean {hint[0]!r}?" if hint else (f" (allowed: {', '.join(fields)})" if fields else "")
        return f"unknown key {loc[-1]!r}{extra}"
    if kind == "missing":
        return "is required"
    if kind in ("enum", "literal_error"):
        expected = e.get("ctx", {}).get("expected", "")
        return f"{value!r} is not allowed; use one of {expected}"
    msg = e["msg"]
    msg = msg.removeprefix("Value error, ")
    if kind == "value_error" and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return f"{msg}; got {value!r}"
    if kind.endswith(("_type", "_parsing")) or kind.startswith(("greater", "less")):
        return f"{msg}, got {value!r}"
    return msg


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The spec section model found at ``loc`` (``providers.<name>`` is ProviderSettings)."""
    model: type[BaseModel] = FleetSpec
    i = 0
    while i < len(loc):
        if model is FleetSpec and loc[i] == "providers":
            if i + 1 >= len(loc):
                return None
            model, i = ProviderSettings, i + 2
            continue
        field = model.model_fields.get(loc[i]) if isinstance(loc[i], str) else None
        ann = field.annotation if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        model, i = ann, i + 1
    return model


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based YAML line of the deepest node on ``loc`` that exists."""
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
