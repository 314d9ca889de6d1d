"""Plain records the state store returns: what was decided and what happened.

Pure data (no I/O). Timestamps are epoch seconds; instance and event times are on the
provider's clock (``Provider.now()``), lock times on the local wall clock.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


class FleetStatus:
    """The life of a fleet record, as the CLI reports it."""

    PLANNED = "planned"  # `up` started, nothing confirmed yet
    UP = "up"  # last apply reached its plan
    SHORT = "short"  # last apply ended with a shortfall
    DOWN = "down"  # `down` terminated everything
    REPAIRED = "repaired"  # rebuilt from provider tags by `fleet repair`


class EventKind:
    """Event kinds the CLI knows how to show; other short kebab-case kinds are accepted."""

    LAUNCHED = "launched"
    PREEMPTED = "preempted"
    TERMINATED = "terminated"
    LOST = "lost"  # vanished without a preemption being known
    DISCOVERED = "discovered"  # found by tag, not in our records (crash or repair)
    NOTICE = "interruption-notice"  # recorded by the node agent
    LAUNCH_FAILED = "launch-failed"
    BLOCKED = "blocked"
    PLAN_APPLIED = "plan-applied"

    ENDINGS = frozenset({PREEMPTED, TERMINATED, LOST})


class LaunchStatus:
    REQUESTED = "requested"  # recorded before the provider call
    DONE = "done"  # the call returned (possibly partial)
    FAILED = "failed"  # the call raised
    ABANDONED = "abandoned"  # left unfinished by a crash and no longer wanted


@dataclass(frozen=True)
class FleetRecord:
    name: str
    status: str
    spec_json: str | None
    spec_hash: str
    backend: str
    created_at: float
    updated_at: float

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["spec"] = json.loads(self.spec_json) if self.spec_json else None
        del data["spec_json"]
        return data


@dataclass(frozen=True)
class LaunchRecord:
    """One launch call: recorded with its idempotency token before the call is made."""

    id: int
    fleet: str
    plan_id: str
    pool: str
    seq: int
    token: str
    count: int
    status: str
    launched: int
    error_kind: str
    error_message: str
    requested_at: float
    finished_at: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class InstanceRecord:
    """What cost accrual needs to know about one instance, alive or ended.

    ``price_per_hour`` is the planned rate (what the offer said at launch); ``billed_per_hour``
    what the provider says it charges, read back after launch (``None`` until read, or where the
    provider cannot tell), ``billed_source`` where that figure came from (``BilledRate.source``)
    and ``rental`` the kind of rental the provider reports (``bid``, ``on-demand``, ``spot``).
    """

    fleet: str
    id: str
    pool: str
    market: str
    accelerator: str
    gpus: int
    price_per_hour: float
    launched_at: float
    on_demand_price: float | None = None
    ended_at: float | None = None
    end_reason: str = ""
    plan_id: str = ""
    billed_per_hour: float | None = None
    billed_source: str = ""
    rental: str = ""

    @property
    def alive(self) -> bool:
        return self.ended_at is None

    @property
    def provider(self) -> str:
        return self.pool.split("/", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class EventRecord:
    id: int
    fleet: str
    ts: float
    kind: str
    instance_id: str = ""
    pool: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BlockRecord:
    """A pool-id prefix (pool, ``provider/region`` or ``provider``) not to use until ``until``
    (epoch seconds on that provider's clock)."""

    prefix: str
    until: float
    reason: str
    created_at: float

    @property
    def provider(self) -> str:
        return self.prefix.split("/", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LockInfo:
    fleet: str
    owner: str
    pid: int
    host: str
    command: str
    acquired_at: float
    expires_at: float

    def describe(self) -> str:
        return f"`fleet {self.command}` (pid {self.pid} on {self.host})"
