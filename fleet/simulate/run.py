"""One simulation: the spec's policy and every baseline on the same replay, and the optimum."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from fleet.catalog import filter_for_spec
from fleet.model import InterruptionSource, Offer
from fleet.simulate import engine, optimum, policies
from fleet.simulate.hazard import fresh_node_rate
from fleet.simulate.market import Replay, build_replay
from fleet.simulate.tracefile import ZoneTrace
from fleet.spec import FleetSpec


@dataclass(frozen=True)
class SimOptions:
    interval_seconds: float = 600
    cold_start_seconds: float = 600
    days: float | None = None
    seed: int = 0
    spare: int = 0
    baselines: bool = True
    optimum: bool = True
    series: bool = False
    rates: str = "catalog"  # or "hazard": spot rates fitted from the replayed traces
    optimum_time_limit: float | None = None  # seconds HiGHS may take (None: until proven optimal)


@dataclass(frozen=True)
class Report:
    """Every policy's ``Outcome`` (ours first) and the optimum, on one replay."""

    replay: Replay
    options: SimOptions
    interval_ticks: int
    cold_ticks: int
    outcomes: tuple[engine.Outcome, ...]
    optimum: optimum.Optimum | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def on_demand_cost(self) -> float | None:
        return next((o.cost for o in self.outcomes if o.policy == policies.AllOnDemand.name), None)


def ticks_of(seconds: float, tick: int, *, at_least: int) -> int:
    """Whole ticks covering ``seconds`` (rounded up), never fewer than ``at_least``."""
    return max(at_least, int(-(-seconds // tick)))


def hazard_rates(replay: Replay) -> dict[str, float]:
    """Fresh-node interruption rate of every replayed spot pool, fitted from its trace."""
    return {pool: fresh_node_rate([c > 0 for c in cap], replay.tick_seconds) for pool, cap in replay.capacity.items()}


def with_hazard_rates(replay: Replay) -> Replay:
    """``replay`` with its spot offers' interruption rates replaced by :func:`hazard_rates`."""
    rates = hazard_rates(replay)
    offers = tuple(
        o.model_copy(
            update={"interruptions_per_hour": rates[o.pool.id], "interruption_source": InterruptionSource.TRACE}
        )
        if o.pool.id in rates
        else o
        for o in replay.offers
    )
    return replace(replay, offers=offers)


#: ``progress(what, done, total)``: ``what`` a policy's name (``done`` of ``total`` ticks) or
#: ``"optimum"`` (0 of 1 when the solve starts, 1 of 1 when it ends).
Progress = Callable[[str, int, int], None]


def simulate(
    spec: FleetSpec,
    offers: Sequence[Offer],
    traces: Sequence[ZoneTrace],
    options: SimOptions = SimOptions(),
    mapping: Mapping[str, Sequence[str]] | None = None,
    progress: Progress | None = None,
) -> Report:
    """Replay ``traces`` for ``spec`` over the catalog ``offers`` (see ``engine`` for the model)."""
    usable = filter_for_spec(offers, spec)
    gap = traces[0].gap_seconds
    ticks = None if options.days is None else max(1, int(options.days * 86400 // gap))
    replay = build_replay(usable, traces, ticks, mapping)
    if options.rates == "hazard":
        replay = with_hazard_rates(replay)
    interval = ticks_of(options.interval_seconds, gap, at_least=1)
    cold = ticks_of(options.cold_start_seconds, gap, at_least=0)
    notes = []
    if not replay.capacity:
        notes.append("no spot pool of this spec follows a trace: only on-demand is simulated")
    target = float(spec.capacity.gpus)
    ours = policies.Rebalancer(policies.with_spare(spec, options.spare), replay.offers)
    chosen: list[engine.Policy] = [ours]
    if options.baselines:
        chosen += [cls(spec, replay.offers) for cls in policies.BASELINES]
    say = progress or (lambda _what, _done, _total: None)
    outcomes = tuple(
        engine.run(
            p,
            spec,
            replay,
            interval_ticks=interval,
            cold_ticks=cold,
            seed=options.seed,
            target=target,
            keep_series=options.series,
            progress=partial(say, p.name),
        )
        for p in chosen
    )
    best = None
    if options.optimum:
        say("optimum", 0, 1)
        best = optimum.solve(spec, replay, cold_ticks=cold, time_limit=options.optimum_time_limit)
        say("optimum", 1, 1)
    return Report(
        replay=replay,
        options=options,
        interval_ticks=interval,
        cold_ticks=cold,
        outcomes=outcomes,
        optimum=best,
        notes=tuple(notes),
    )
