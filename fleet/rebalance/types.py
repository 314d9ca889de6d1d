"""The rebalancer's inputs and actions: plain frozen values (JSON-friendly via ``to_dict``).

Times are epoch seconds on the providers' clock (a simulator passes its virtual clock).
Weighted GPUs follow the spec's accelerator weights (H100 = 1.0).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from fleet.model import Market, Offer


@dataclass(frozen=True)
class ObservedInstance:
    """One alive instance as the providers report it.

    ``ours``: it carries this fleet's tag (anything else is never acted on).
    ``notice``: the kind of interruption notice the node agent reported for it, ``""`` for
    none: ``rebalance`` (AWS advice: elevated risk, may run on for hours) or a final kind
    (``terminate``, ``preempt``, Azure ``Preempt`` eviction, ...). ``outbid``: a Vast
    interruptible instance whose bid was beaten (stopped until the bid is raised).
    ``bid``: its current bid in USD/h where the provider bids (Vast), else ``None``.
    ``role``: ``head`` for the spec's head nodes (never moved, never counted as capacity).
    ``starting``: launched but not ready yet (still booting: the provider reports it pending,
    or a simulator's cold start has not passed); it counts as capacity, and the bridge rule
    (``fleet.rebalance.bridge``) covers it with on-demand meanwhile.
    """

    id: str
    pool: str
    market: Market
    accelerator: str
    gpus: int
    price_per_hour: float
    launched_at: float
    ours: bool = True
    notice: str = ""
    outbid: bool = False
    bid: float | None = None
    role: str = "worker"
    starting: bool = False

    @property
    def provider(self) -> str:
        return self.pool.split("/", 1)[0]


#: Pool event kinds: the fleet lost a spot instance there / a launch there found no capacity.
INTERRUPTED: Final = "interrupted"
NO_CAPACITY: Final = "no-capacity"


@dataclass(frozen=True)
class PoolEvent:
    """Something a pool did to this fleet at time ``at`` (``kind``: interrupted | no-capacity)."""

    pool: str
    kind: Literal["interrupted", "no-capacity"]
    at: float


@dataclass(frozen=True)
class Exposure:
    """What this fleet saw of one pool: instance-hours run there and interruptions suffered."""

    hours: float
    interruptions: int


@dataclass(frozen=True)
class PolicyState:
    """What ``decide`` carries from one pass to the next (``Decision.state`` is the next one).

    ``last_return_at``: when on-demand nodes were last returned to spot (for the cooldown).
    """

    last_return_at: float | None = None


#: Why a launch is asked for.
LaunchReason = Literal["replace-lost", "fallback", "early-replace", "return-to-spot", "baseline", "head-lost", "bridge"]


@dataclass(frozen=True)
class Launch:
    """Launch ``count`` instances of ``offer``'s pool."""

    offer: Offer
    count: int
    reason: LaunchReason
    kind: Literal["launch"] = "launch"

    @property
    def pool(self) -> str:
        return self.offer.pool.id

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "pool": self.pool,
            "count": self.count,
            "reason": self.reason,
            "market": self.offer.market.value,
            "price_per_hour": self.offer.price_per_hour,
        }


@dataclass(frozen=True)
class Terminate:
    """Terminate one of the fleet's instances.

    ``after``: pools whose launches in this same decision must all come up first (make
    before break); empty when nothing has to come up first.
    """

    instance_id: str
    pool: str
    reason: Literal["return-to-spot", "replaced-early", "outbid-replaced", "bridge-released", "over-bill"]
    after: tuple[str, ...] = ()
    kind: Literal["terminate"] = "terminate"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "instance": self.instance_id,
            "pool": self.pool,
            "reason": self.reason,
            "after": list(self.after),
        }


@dataclass(frozen=True)
class RaiseBid:
    """Raise an outbid instance's bid (Vast) to ``bid`` USD/h, never above ``cap``.

    Providers implement it where they have the ability ``providers.base.RaisesBids``.
    """

    instance_id: str
    pool: str
    bid: float
    cap: float
    kind: Literal["raise-bid"] = "raise-bid"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "instance": self.instance_id, "pool": self.pool, "bid": self.bid, "cap": self.cap}


Action = Launch | Terminate | RaiseBid


@dataclass(frozen=True)
class Decision:
    """What one pass should do, and why.

    ``actions``: launches first, then bid raises, then terminations (apply in this order).
    ``blocked``: pools the back-off and warnings kept the planner away from.
    ``offers``: the offers as planned with, interruption rates updated from ``Exposure``.
    ``short_weighted_gpus``: how far below target the fleet stays after the actions.
    ``incidents``: what must be said loudly (a lost head), beside the routine ``notes``.
    """

    actions: tuple[Action, ...]
    state: PolicyState
    target_weighted_gpus: float
    healthy_weighted_gpus: float
    on_demand_weighted_gpus: float
    short_weighted_gpus: float
    blocked: tuple[str, ...] = ()
    offers: tuple[Offer, ...] = ()
    notes: tuple[str, ...] = field(default=())
    incidents: tuple[str, ...] = field(default=())

    @property
    def launches(self) -> list[Launch]:
        return [a for a in self.actions if isinstance(a, Launch)]

    @property
    def terminations(self) -> list[Terminate]:
        return [a for a in self.actions if isinstance(a, Terminate)]

    @property
    def bids(self) -> list[RaiseBid]:
        return [a for a in self.actions if isinstance(a, RaiseBid)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "actions": [a.to_dict() for a in self.actions],
            "state": asdict(self.state),
            "target_weighted_gpus": self.target_weighted_gpus,
            "healthy_weighted_gpus": self.healthy_weighted_gpus,
            "on_demand_weighted_gpus": self.on_demand_weighted_gpus,
            "short_weighted_gpus": self.short_weighted_gpus,
            "blocked": list(self.blocked),
            "notes": list(self.notes),
            **({"incidents": list(self.incidents)} if self.incidents else {}),
        }
