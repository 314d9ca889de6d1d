"""The simulated spot market: pure functions of (seed, pool, simulated time).

Every catalog pool (the CPU head types included) becomes a ``PoolModel``. Spot pools follow a recorded availability
trace (GCP H100 zones their own trace; every other spot pool a trace picked from a hash
of its pool id, with its own phase offset so pools differ) plus a seeded background
hazard; on-demand pools have large finite capacity and are never preempted.

Times here are *elapsed* simulated seconds since the cloud started; the cloud adds its
start epoch. Nothing reads a clock or global randomness: the same seed gives the same
market, the same capacities and the same preemption times.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

from fleet.model import InterruptionSource, Market, Offer
from providers.local.vendors import VENDORS

if TYPE_CHECKING:  # the catalog and the traces are read when a pool is first modelled, not on import
    from fleet.traces import Trace

ON_DEMAND_CAPACITY = 1000
#: Spot capacity range (instances) by GPUs per node: big nodes are scarcer.
SPOT_CAPACITY = ((8, (4, 32)), (4, (8, 48)), (0, (16, 96)))


def stable_int(*parts: object) -> int:
    """A 64-bit integer from ``parts``; stable across processes and Python versions."""
    return int.from_bytes(digest(*parts)[:8], "big")


def digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()


@dataclass(frozen=True)
class PoolModel:
    """One pool's behaviour: capacity over time and when its instances are taken back."""

    offer: Offer
    trace: Trace | None  # None: on-demand, never preempted
    phase: float  # trace seconds at elapsed time 0
    base_capacity: int
    hazard_per_hour: float

    @property
    def id(self) -> str:
        return self.offer.pool.id

    def available(self, elapsed: float) -> bool:
        """Whether the trace offers capacity at ``elapsed`` (always, for on-demand)."""
        return self.trace is None or self.trace.available_at(self.phase + elapsed)

    def capacity(self, elapsed: float, override: int | None = None) -> int:
        """Instances the pool can hold at ``elapsed`` (running ones included)."""
        if not self.available(elapsed):
            return 0
        return self.base_capacity if override is None else override

    @cached_property
    def interruptions_per_hour(self) -> float:
        if self.trace is None:
            return 0.0
        return self.trace.preemptions_per_hour + self.hazard_per_hour

    def preemption_at(self, launched: float, instance_key: str, seed: int) -> float | None:
        """Elapsed time at which an instance launched at ``launched`` is preempted, None if never.

        The earlier of the trace's next unavailable tick and a seeded exponential draw.
        """
        if self.trace is None:
            return None
        start = self.phase + launched
        nxt = self.trace.next_unavailable(start)
        by_trace = math.inf if nxt is None else launched + (nxt - start)
        by_hazard = math.inf
        if self.hazard_per_hour > 0:
            rng = random.Random(stable_int(seed, "hazard", instance_key))
            by_hazard = launched + rng.expovariate(self.hazard_per_hour / 3600)
        at = min(by_trace, by_hazard)
        return None if math.isinf(at) else at

    @cached_property
    def _local_offer(self) -> Offer:
        update: dict[str, object] = {"source": "local"}
        if self.trace is not None:
            update.update(
                interruptions_per_hour=self.interruptions_per_hour, interruption_source=InterruptionSource.TRACE
            )
        return self.offer.model_copy(update=update)

    def as_offer(self, free: int) -> Offer:
        """The catalog offer as the local cloud reports it with ``free`` instances left."""
        return self._local_offer.model_copy(update={"capacity_hint": max(0, free)})


class SpotMarket:
    """Every catalog pool's model for one seed, built lazily and cached: a vendor's pools are read
    from the catalog when first asked for, only those of the accelerators asked for (a plan for
    H100s models a few hundred of the snapshot's thousands of pools), and only that vendor's
    registration record is read (whether it sells spot)."""

    def __init__(self, seed: int):
        self.seed = seed
        self._models: dict[str, PoolModel] = {}
        #: Every offer read so far, by pool id.
        self._offers: dict[str, Offer] = {}
        #: (vendor, accelerators or None for all) -> its pool ids, in catalog order.
        self._listed: dict[tuple[str, frozenset[str] | None], list[str]] = {}

    @staticmethod
    @lru_cache(maxsize=8)
    def for_seed(seed: int) -> SpotMarket:
        """A shared market per seed (markets are immutable once built)."""
        return SpotMarket(seed)

    def pool_ids(self, provider: str, accelerators: Iterable[str] | None = None) -> list[str]:
        """``provider``'s pool ids in catalog order (snapshot pools, then CPU head types); with
        ``accelerators`` (any case; empty: all) only the pools of those."""
        accs = frozenset(a.upper() for a in accelerators) if accelerators else None
        found = self._listed.get((provider, accs))
        if found is None:
            found = self._listed[(provider, accs)] = self._read(provider, accs)
        return found

    def _read(self, provider: str, accs: frozenset[str] | None) -> list[str]:
        """Read ``provider``'s offers of ``accs`` from the catalog; a vendor whose adapter sells no
        spot is simulated without it."""
        if provider not in VENDORS:
            return []
        from fleet.catalog import CPU, cpu_offers, snapshot_offers_of, spot_not_sold

        no_spot = provider in spot_not_sold((provider,))
        cpu = cpu_offers() if accs is None or CPU in accs else ()
        read = {
            o.pool.id: o
            for o in (*snapshot_offers_of(accs, provider=provider), *cpu)
            if o.pool.provider == provider and not (o.market is Market.SPOT and no_spot)
        }
        self._offers.update(read)
        return list(read)

    def __contains__(self, pool_id: str) -> bool:
        if pool_id not in self._offers:
            self.pool_ids(pool_id.split("/", 1)[0])  # read the vendor's every pool once
        return pool_id in self._offers

    def pool(self, pool_id: str) -> PoolModel:
        """The model of ``pool_id``; KeyError when the catalog has no such pool."""
        model = self._models.get(pool_id)
        if model is None:
            if pool_id not in self:
                raise KeyError(pool_id)
            model = self._models[pool_id] = self._build(self._offers[pool_id])
        return model

    def _build(self, offer: Offer) -> PoolModel:
        from fleet.traces import all_traces, trace_for_zone

        key = offer.pool.id
        vendor = VENDORS[offer.pool.provider]
        if offer.market is Market.ON_DEMAND:
            return PoolModel(offer, None, 0.0, ON_DEMAND_CAPACITY, 0.0)
        trace = None
        if offer.pool.provider == "gcp" and offer.accelerator == "H100" and offer.pool.zone:
            trace = trace_for_zone(offer.pool.zone)
            key = f"gcp-zone/{offer.pool.zone}" if trace is not None else key  # one zone, one trace
        if trace is None:
            traces = all_traces()
            trace = traces[stable_int(self.seed, "trace", key) % len(traces)]
        phase = float(stable_int(self.seed, "phase", key) % len(trace.available)) * trace.gap_seconds
        lo, hi = next(r for min_gpus, r in SPOT_CAPACITY if offer.gpus >= min_gpus)
        capacity = lo + stable_int(self.seed, "capacity", offer.pool.id) % (hi - lo + 1)
        return PoolModel(offer, trace, phase, capacity, vendor.hazard_per_hour)
