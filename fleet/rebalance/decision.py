"""``decide(...)``: what one rebalancing pass should do (pure: no I/O, no clock, no randomness).

Inputs are explicit so a simulator can drive it on a virtual clock: the spec, the offers now,
the alive instances the providers report (with pool, market, launch time, warnings), recent
pool events (interruptions, "no capacity" answers) with their times, ``now``, the policy
state of the previous pass, and the fleet's exposure per pool. The rules, in order:

1. **Never touch what the fleet did not create**: instances with ``ours=False`` are ignored.
2. **Learn**: spot offers' interruption rates are updated from ``exposure`` by a
   Gamma-Poisson update of the catalog's prior (``fleet.rebalance.learning``); every plan
   below uses the learned rates. With ``rebalance.charge_cold_start`` the plans charge a lost
   node its restart plus ``cold_start_seconds`` (``learning.loss_priced``).
3. **Warnings**: an instance with a notice (AWS rebalance recommendation, Azure eviction,
   any final notice) no longer counts, so its replacement is planned now; an advisory one is
   terminated once the healthy rest covers the target (``replaced-early``). An outbid Vast
   instance gets ``RaiseBid`` within the cap when that beats replacing it
   (``fleet.rebalance.bidding``), else it is replaced the same way (``outbid-replaced``).
4. **Replace lost capacity** from the best pools now: the planner re-plans with the healthy
   instances as ``current``; pools that recently interrupted us or had no capacity are
   avoided by a decaying back-off (``fleet.rebalance.backoff``), as are pools with warned
   instances; healthy instances in such pools are kept (no new launches there). When the other
   pools cannot bring the fleet to target (rules 5 and 7 included), the pools backed off only
   for interruptions are planned with again rather than leaving the fleet short.
5. **On-demand fallback up to the critical level**: when the plan would need on-demand beyond
   ``spec.critical_gpus`` (spot is short), on-demand launches are kept only until that level
   is reached (the last node may pass it by less than its own weight) and spot fills what it
   can of the rest; the fleet then stays short rather than buying more on-demand. On-demand
   that the diversification caps require even when spot is plentiful (a plan from scratch with
   every spot pool unbounded holds it, as when one zone holds every spot pool) is part of the
   fleet, not a fallback: the level is at least that much.
6. **Return to spot with hysteresis**: on-demand nodes beyond the baseline that ran at least
   ``min_fallback_age_seconds`` are moved back to spot, at most ``max_moves_per_pass`` per pass,
   only when the fleet is otherwise at target, the move saves at least ``min_saving`` of their
   price (spot counted at the planner's true cost, interruptions included), and ``return_cooldown_seconds`` passed since the last return. The spot replacements
   launch first; each termination names them in ``Terminate.after``.
7. **Keep the baseline, never exceed the budget**: on-demand is never terminated below
   ``on_demand_gpus``; launches are dropped (dearest per weighted GPU first) until the alive
   fleet plus its launches fits ``budget.max_per_hour``; launches the plan added beyond the
   target (a re-plan may move nodes) are dropped too, so a pass never over-fills.
8. **The head stays on-demand**: head nodes (``role`` ``head``) are not capacity and never
   move; fewer than ``head.count`` alive is an incident, and the missing ones are relaunched
   on-demand (``fleet.rebalance.head_rule``).
9. **The bridge** (``rebalance.bridge: true``): on-demand covers, in the same pass, what is not ready (lost and still
   starting) up to the critical level, and is released once the ready rest covers the target
   (``fleet.rebalance.bridge``); a pass that releases bridge nodes returns nothing else to spot.
10. **Hedging** (``rebalance.hedge: true``): the pass plans spare spot capacity sized from
   the learned rates and the cold start, no zone, and no group of zones that interrupted the
   fleet together, above the spares (``fleet.rebalance.hedge``).
11. **Spot moves** (``rebalance.spot_moves: true``): when nothing else is to do, ready spot
   nodes in pools dearer than the cheapest one the plan may use move there on rule 6's terms
   (make before break, ``min_saving``, ``max_moves_per_pass``, the cooldown).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence

from fleet.errors import PlanError
from fleet.model import Market, Offer, Plan, PoolKey, Quota
from fleet.rebalance import bridge, hedge
from fleet.rebalance.backoff import backoff_until
from fleet.rebalance.bidding import outbid_action
from fleet.rebalance.head_rule import decide_with_head
from fleet.rebalance.learning import learned_offers, loss_priced
from fleet.rebalance.types import (
    Action,
    Decision,
    Exposure,
    Launch,
    LaunchReason,
    ObservedInstance,
    PolicyState,
    PoolEvent,
    RaiseBid,
    Terminate,
)
from fleet.spec import FleetSpec, VastBid

EPS = 1e-9
#: Notice kinds that are advice: the node may keep running (AWS rebalance recommendation; an
#: instance billed over its plan under ``budget.cap_action: replace``, ``fleet.rebalance.capping``).
ADVISORY = frozenset({"rebalance", "over-bill"})


def decide(
    spec: FleetSpec,
    offers: Sequence[Offer],
    instances: Sequence[ObservedInstance],
    events: Sequence[PoolEvent],
    now: float,
    state: PolicyState = PolicyState(),
    *,
    exposure: Mapping[str, Exposure] | None = None,
    bidding: Collection[str] = (),
) -> Decision:
    """One pass's actions for ``spec``'s fleet; see the module doc for the rules.

    ``bidding``: providers whose instances take ``RaiseBid`` (``providers.base.RaisesBids``).
    Never raises for want of offers: when nothing can be planned the decision says why in
    ``notes`` and holds no launches. A spec with ``head:`` adds the head rule
    (``fleet.rebalance.head_rule``): the head is never moved, a lost one is an incident.
    """
    if spec.head is not None:
        return decide_with_head(
            spec,
            offers,
            instances,
            lambda s, o, i: decide(s, o, i, events, now, state, exposure=exposure, bidding=bidding),
        )
    learned = learned_offers(offers, exposure or {}, spec.rebalance.prior_hours)
    spec = loss_priced(spec)
    caps: list[Quota] = []
    if spec.rebalance.hedge:
        kept = [i for i in instances if i.ours and not i.notice]
        spare = hedge.spares(spec, learned, kept)
        groups = hedge.correlated_groups(events, now, spec.rebalance.backoff_memory_seconds)
        caps = hedge.group_caps(spec, learned, kept, groups, spare)
        spec = hedge.hedged(spec, spare)
    ctx = _Context(spec, learned, now, caps)
    ours = [i for i in instances if i.ours]
    notes: list[str] = []

    bids, replace_outbid = _outbids(ctx, ours, bidding)
    warned = [i for i in ours if i.notice or i.id in replace_outbid]
    warned_ids = {i.id for i in warned}
    healthy = [i for i in ours if i.id not in warned_ids]
    backoff = backoff_until(events, now, spec.rebalance)
    avoid = set(backoff) | {i.pool for i in warned}
    ctx.prepare(healthy, avoid)

    have = ctx.weighted(healthy)
    od_have = ctx.weighted(i for i in healthy if i.market is Market.ON_DEMAND)
    adds: dict[str, int] = {}
    if have < ctx.target - EPS or od_have < ctx.baseline - EPS:
        refill: list[str] = []
        adds = _refill(ctx, have, od_have, refill)
        thaw = _interrupted_only(events, backoff) - {i.pool for i in warned}
        adds = _lift_backoff(ctx, healthy, avoid, thaw, have, od_have, adds, refill)
        notes += refill
    bridged = _bridge(ctx, healthy, adds, notes)
    adds = _within_budget(ctx, ours, {p: adds.get(p, 0) + bridged.get(p, 0) for p in {*adds, *bridged}}, notes)

    launches = []
    for p, n in sorted(adds.items()):
        bridge_n = min(n, bridged.get(p, 0))
        if n > bridge_n:
            launches.append(Launch(ctx.offer[p], n - bridge_n, _reason(ctx, p, od_have, warned, have)))
        if bridge_n:
            launches.append(Launch(ctx.offer[p], bridge_n, "bridge"))
    terminations: list[Terminate] = []
    after = have + ctx.add_weight(adds)
    new_state = state
    if not adds and have >= ctx.target - EPS:
        for i in warned:
            if i.notice in ADVISORY or i.id in replace_outbid:
                terminations.append(
                    Terminate(
                        i.id,
                        i.pool,
                        "outbid-replaced"
                        if i.id in replace_outbid
                        else "over-bill"
                        if i.notice == "over-bill"
                        else "replaced-early",
                    )
                )
        released = _released(ctx, healthy)
        terminations += [Terminate(i.id, i.pool, "bridge-released") for i in released]
        after -= ctx.weighted(released)
        moved = None if released else _return_to_spot(ctx, ours, healthy, od_have, state, notes)
        if moved is None and not released:
            moved = _move_spot(ctx, ours, healthy, od_have, state, notes)
        if moved is not None:
            ret_adds, doomed = moved
            launches += [Launch(ctx.offer[p], n, "return-to-spot") for p, n in sorted(ret_adds.items())]
            terminations += [Terminate(i.id, i.pool, "return-to-spot", after=tuple(sorted(ret_adds))) for i in doomed]
            after += ctx.add_weight(ret_adds) - ctx.weighted(doomed)
            new_state = PolicyState(last_return_at=now)
    od_after = od_have + ctx.add_weight({p: n for p, n in adds.items() if not ctx.spot(p)})
    actions: list[Action] = [*launches, *bids, *terminations]
    return Decision(
        actions=tuple(actions),
        state=new_state,
        target_weighted_gpus=ctx.target,
        healthy_weighted_gpus=have,
        on_demand_weighted_gpus=od_after,
        short_weighted_gpus=max(0.0, ctx.target - after),
        blocked=tuple(sorted(ctx.blocked)),
        offers=tuple(ctx.learned),
        notes=tuple(notes),
    )


class _Context:
    """The spec's numbers and the plannable offers of one decision."""

    def __init__(self, spec: FleetSpec, learned: list[Offer], now: float, quotas: Sequence[Quota] = ()):
        self.spec = spec
        self.quotas = tuple(quotas)  # the hedge's caps on zones that failed together
        self.learned = learned
        self.now = now
        self.target = float(spec.capacity.gpus)
        self.baseline = float(spec.capacity.on_demand_gpus)
        self.critical = max(spec.critical_gpus, self.baseline)
        self.offer: dict[str, Offer] = {o.pool.id: o for o in learned}
        self.plannable: list[Offer] = list(learned)
        self.blocked: set[str] = set()
        self.current: dict[str, int] = {}

    def weight(self, accelerator: str, gpus: int) -> float:
        return self.spec.weight(accelerator) * gpus

    def weighted(self, instances: Iterable[ObservedInstance]) -> float:
        return sum(self.weight(i.accelerator, i.gpus) for i in instances)

    def node_weight(self, pool: str) -> float:
        o = self.offer[pool]
        return self.weight(o.accelerator, o.gpus)

    def add_weight(self, adds: Mapping[str, int]) -> float:
        return sum(self.node_weight(p) * n for p, n in adds.items())

    def spot(self, pool: str) -> bool:
        return self.offer[pool].market is Market.SPOT

    def prepare(self, healthy: list[ObservedInstance], avoid: set[str]) -> None:
        """Offers the planner may use: avoided pools are blocked where nothing healthy runs, and
        frozen (capacity hint 0: keep, launch no more) where something does; a pool with healthy
        instances but no offer now gets one built from an instance, frozen too."""
        self.current = dict(Counter(i.pool for i in healthy))
        for inst in healthy:
            if inst.pool not in self.offer:
                self.offer[inst.pool] = Offer(
                    pool=PoolKey.from_id(inst.pool),
                    accelerator=inst.accelerator,
                    gpus=inst.gpus,
                    price_per_hour=inst.price_per_hour,
                    capacity_hint=0,
                    source="observed",
                )
                avoid = avoid | {inst.pool}
        self.blocked = {p for p in avoid if not self.current.get(p)}
        self.plannable = [
            o.model_copy(update={"capacity_hint": 0}) if o.pool.id in avoid else o
            for o in self.offer.values()
            if o.pool.id not in self.blocked
        ]

    def plan(self, offers: Sequence[Offer], current: Mapping[str, int], notes: list[str]) -> Plan | None:
        from fleet.planning import plan

        try:
            return plan(self.spec, offers, current=current, blocked=sorted(self.blocked), quotas=self.quotas)
        except PlanError as err:
            notes.append(f"nothing to plan with: {err}")
            return None


def _additions(p: Plan, current: Mapping[str, int]) -> dict[str, int]:
    return {pool: n - current.get(pool, 0) for pool, n in p.counts().items() if n > current.get(pool, 0)}


def _refill(ctx: _Context, have: float, od_have: float, notes: list[str]) -> dict[str, int]:
    """Launches that bring the healthy fleet back to target (rules 4 and 5)."""
    first = ctx.plan(ctx.plannable, ctx.current, notes)
    if first is None:
        return {}
    adds = _additions(first, ctx.current)
    od_adds = {p: n for p, n in adds.items() if not ctx.spot(p)}
    if od_have + ctx.add_weight(od_adds) > max(ctx.critical, od_have) + EPS:
        level = max(ctx.critical, _designed_on_demand(ctx))
        if od_have + ctx.add_weight(od_adds) <= max(level, od_have) + EPS:
            return _trim_excess(ctx, adds, have, od_have)
        keep = _up_to_level(ctx, od_adds, max(level, od_have) - od_have)
        notes.append(f"spot is short: on-demand fills up to the critical level ({level:g} weighted GPUs)")
        offers = _on_demand_limited(ctx, keep)
        second = ctx.plan(offers, ctx.current, notes)
        adds = _additions(second, ctx.current) if second is not None else keep
    return _trim_excess(ctx, adds, have, od_have)


def _designed_on_demand(ctx: _Context) -> float:
    """The on-demand weighted GPUs the fleet holds even when spot is plentiful: those of a plan from
    scratch over today's offers with every spot pool unblocked and its capacity unbounded. The
    diversification caps can require them (one zone holds every spot pool, as a Vast fleet whose
    machines share a geolocation does, and a zone may hold only part of the spot part); such
    nodes are part of the fleet ``fleet up`` launches, not a fallback, so rule 5 replaces them too."""
    from fleet.planning import plan

    offers = [o.model_copy(update={"capacity_hint": None}) if o.market is Market.SPOT else o for o in ctx.learned]
    try:
        design = plan(ctx.spec, offers)
    except PlanError:
        return 0.0
    if not design.feasible:
        return 0.0
    return sum(a.weighted_gpus for a in design.allocations if a.offer.market is Market.ON_DEMAND)


def _bridge(
    ctx: _Context, healthy: list[ObservedInstance], adds: Mapping[str, int], notes: list[str]
) -> dict[str, int]:
    """The bridge's on-demand launches beside ``adds`` (rule 9)."""
    if not ctx.spec.rebalance.bridge:
        return {}
    level = min(ctx.critical, ctx.target)
    od_adds = ctx.add_weight({p: n for p, n in adds.items() if not ctx.spot(p)})
    on_demand = [o for o in ctx.plannable if o.market is Market.ON_DEMAND]
    more = bridge.cover(
        level,
        healthy,
        lambda i: ctx.weight(i.accelerator, i.gpus),
        od_adds,
        on_demand,
        lambda o: ctx.weight(o.accelerator, o.gpus),
    )
    if more:
        notes.append(f"bridge: {ctx.add_weight(more):g} weighted GPUs on-demand until what replaces them is ready")
    return more


def _released(ctx: _Context, healthy: list[ObservedInstance]) -> list[ObservedInstance]:
    """Bridge nodes the ready fleet no longer needs (rule 9)."""
    if not ctx.spec.rebalance.bridge:
        return []
    weight = lambda i: ctx.weight(i.accelerator, i.gpus)  # noqa: E731
    if not bridge.releases(ctx.target, ctx.baseline, healthy, weight):
        return []
    return bridge.releases(ctx.target, max(ctx.baseline, _designed_on_demand(ctx)), healthy, weight)


def _interrupted_only(events: Sequence[PoolEvent], backoff: Mapping[str, float]) -> set[str]:
    """The backed-off pools whose events are all interruptions (none answered "no capacity")."""
    refused = {e.pool for e in events if e.kind != "interrupted"}
    return {p for p in backoff if p not in refused}


def _lift_backoff(
    ctx: _Context,
    healthy: list[ObservedInstance],
    avoid: set[str],
    thaw: set[str],
    have: float,
    od_have: float,
    adds: dict[str, int],
    notes: list[str],
) -> dict[str, int]:
    """Rule 4, last resort: when the pools not backed off leave the fleet short (the caps forbid
    more there, and on-demand stops at the critical level), the pools in ``thaw``, backed off only
    for interrupting us, are planned with again, so caution alone does not keep the fleet short
    (with regional pools, as Azure scale sets give, one eviction backs off a whole region). A pool
    that answered "no capacity" stays avoided. Returns ``adds``, or the launches of that plan when
    they bring more weighted GPUs (``notes`` then tells that plan's story instead of the first's)."""
    if not thaw or have + ctx.add_weight(adds) >= ctx.target - EPS:
        return adds
    ctx.prepare(healthy, avoid - thaw)
    tried: list[str] = []
    more = _refill(ctx, have, od_have, tried)
    if ctx.add_weight(more) <= ctx.add_weight(adds) + EPS:
        ctx.prepare(healthy, avoid)
        return adds
    notes[:] = [*tried, f"back-off lifted for {', '.join(sorted(thaw))}: the other pools cannot reach the target"]
    return more


def _up_to_level(ctx: _Context, od_adds: Mapping[str, int], room: float) -> dict[str, int]:
    """On-demand nodes, cheapest per weighted GPU first, until ``room`` weighted GPUs are filled."""
    keep: dict[str, int] = {}
    filled = 0.0
    for pool in sorted(od_adds, key=lambda p: (ctx.offer[p].price_per_hour / ctx.node_weight(p), p)):
        for _ in range(od_adds[pool]):
            if filled >= room - EPS:
                return keep
            keep[pool] = keep.get(pool, 0) + 1
            filled += ctx.node_weight(pool)
    return keep


def _on_demand_limited(ctx: _Context, allowed: Mapping[str, int]) -> list[Offer]:
    """The plannable offers with on-demand launches limited to ``allowed`` (pool -> new nodes)."""
    out = []
    for o in ctx.plannable:
        if o.market is Market.ON_DEMAND:
            extra = allowed.get(o.pool.id, 0)
            if not extra and not ctx.current.get(o.pool.id):
                continue
            o = o.model_copy(update={"capacity_hint": extra})
        out.append(o)
    return out


def _trim_excess(ctx: _Context, adds: dict[str, int], have: float, od_have: float) -> dict[str, int]:
    """Drop launches (dearest per weighted GPU first, spot before on-demand) the target does not
    need: a re-plan may move nodes, and a pass only ever adds what is missing."""
    adds = dict(adds)
    total = have + ctx.add_weight(adds)
    od = od_have + ctx.add_weight({p: n for p, n in adds.items() if not ctx.spot(p)})
    order = sorted(adds, key=lambda p: (not ctx.spot(p), -ctx.offer[p].price_per_hour / ctx.node_weight(p), p))
    for pool in order:
        w = ctx.node_weight(pool)
        while adds.get(pool) and total - w >= ctx.target - EPS and (ctx.spot(pool) or od - w >= ctx.baseline - EPS):
            adds[pool] -= 1
            total -= w
            od -= 0 if ctx.spot(pool) else w
        if not adds.get(pool):
            adds.pop(pool, None)
    return adds


def _within_budget(
    ctx: _Context, alive: Sequence[ObservedInstance], adds: dict[str, int], notes: list[str]
) -> dict[str, int]:
    """Drop launches, dearest per weighted GPU first, until alive + launches fit the budget."""
    cap = ctx.spec.budget.max_per_hour
    if cap is None or not adds:
        return adds
    adds = dict(adds)
    spend = sum(i.price_per_hour for i in alive) + sum(ctx.offer[p].price_per_hour * n for p, n in adds.items())
    dropped = 0
    for pool in sorted(adds, key=lambda p: (-ctx.offer[p].price_per_hour / ctx.node_weight(p), p)):
        while adds.get(pool) and spend > cap + EPS:
            adds[pool] -= 1
            spend -= ctx.offer[pool].price_per_hour
            dropped += 1
        if not adds.get(pool):
            adds.pop(pool, None)
    if dropped:
        notes.append(f"budget ${cap:g}/h: {dropped} launch(es) left out")
    return adds


def _reason(ctx: _Context, pool: str, od_have: float, warned: list[ObservedInstance], have: float) -> LaunchReason:
    if not ctx.spot(pool):
        return "baseline" if od_have < ctx.baseline - EPS else "fallback"
    if warned and have + ctx.weighted(warned) >= ctx.target - EPS:
        return "early-replace"
    return "replace-lost"


def _outbids(
    ctx: _Context, ours: Sequence[ObservedInstance], bidding: Collection[str]
) -> tuple[list[RaiseBid], set[str]]:
    """Bid raises for outbid instances where that beats replacing; the ids to replace."""
    raises: list[RaiseBid] = []
    replace: set[str] = set()
    spot = [o for o in ctx.learned if o.market is Market.SPOT and o.capacity_hint != 0]
    for inst in ours:
        if not inst.outbid:
            continue
        weight = ctx.weight(inst.accelerator, inst.gpus)
        others = [
            o.price_per_hour / ctx.weight(o.accelerator, o.gpus)
            for o in spot
            if o.pool.id != inst.pool and ctx.weight(o.accelerator, o.gpus) > 0
        ]
        bid = getattr(ctx.spec.provider_settings(inst.provider), "bid", None)  # a bidding provider's settings
        action = None
        if inst.provider in bidding and isinstance(bid, VastBid):
            action = outbid_action(inst, ctx.offer.get(inst.pool), bid, weight, min(others) if others else None)
        if action is None:
            replace.add(inst.id)
        else:
            raises.append(action)
    return raises, replace


def _return_to_spot(
    ctx: _Context,
    ours: Sequence[ObservedInstance],
    healthy: list[ObservedInstance],
    od_have: float,
    state: PolicyState,
    notes: list[str],
) -> tuple[dict[str, int], list[ObservedInstance]] | None:
    """Spot launches and the on-demand fallback nodes they replace (rule 6), or ``None``."""
    policy = ctx.spec.rebalance
    if od_have <= ctx.baseline + EPS or policy.max_moves_per_pass == 0:
        return None
    if state.last_return_at is not None and ctx.now - state.last_return_at < policy.return_cooldown_seconds:
        return None
    old = [
        i
        for i in healthy
        if i.market is Market.ON_DEMAND and ctx.now - i.launched_at >= policy.min_fallback_age_seconds
    ]
    old.sort(key=lambda i: (-i.price_per_hour / max(ctx.weight(i.accelerator, i.gpus), EPS), -i.launched_at, i.id))
    chosen: list[ObservedInstance] = []
    spare = od_have - ctx.baseline
    for inst in old:
        w = ctx.weight(inst.accelerator, inst.gpus)
        if len(chosen) < policy.max_moves_per_pass and w <= spare + EPS:
            chosen.append(inst)
            spare -= w
    return _saving_move(ctx, ours, healthy, od_have, chosen, notes, "returning {k} on-demand node(s) to spot")


def _saving_move(
    ctx: _Context,
    ours: Sequence[ObservedInstance],
    healthy: list[ObservedInstance],
    od_have: float,
    chosen: list[ObservedInstance],
    notes: list[str],
    say: str,
    *,
    whole: bool = False,
) -> tuple[dict[str, int], list[ObservedInstance]] | None:
    """The largest prefix of ``chosen`` whose spot replacements save ``min_saving`` of its price
    within the budget (only all of ``chosen`` when ``whole``): (launches, nodes they replace), or
    ``None``."""
    have = ctx.weighted(healthy)
    for k in range(len(chosen), 0 if not whole else len(chosen) - 1, -1):
        move = chosen[:k]
        current = dict(ctx.current)
        for inst in move:
            current[inst.pool] -= 1
        current = {p: n for p, n in current.items() if n > 0}
        od_moved = ctx.weighted(i for i in move if i.market is Market.ON_DEMAND)
        found = _spot_moves(ctx, current, have - ctx.weighted(move), od_have - od_moved)
        if found is None or set(found[0]) & {i.pool for i in move}:
            continue
        saved, cost_new = found
        cost_old = sum(i.price_per_hour for i in move)
        if cost_old <= 0 or 1 - cost_new / cost_old < ctx.spec.rebalance.min_saving - EPS:
            continue
        cap = ctx.spec.budget.max_per_hour
        if cap is not None and sum(i.price_per_hour for i in ours) + cost_new > cap + EPS:
            continue
        notes.append(f"{say.format(k=k)} saves ${cost_old - cost_new:.2f}/h")
        return saved, move
    return None


def _move_spot(
    ctx: _Context,
    ours: Sequence[ObservedInstance],
    healthy: list[ObservedInstance],
    od_have: float,
    state: PolicyState,
    notes: list[str],
) -> tuple[dict[str, int], list[ObservedInstance]] | None:
    """Rule 11 (``rebalance.spot_moves``): ready spot nodes in pools dearer per weighted GPU than
    the cheapest spot pool the plan may use now move there, make before break, on the terms of
    rule 6 (``min_saving`` at the planner's true cost, ``max_moves_per_pass``, the cooldown):
    once a back-off ends, the fleet goes back to where the learned rates put it."""
    policy = ctx.spec.rebalance
    if not policy.spot_moves or policy.max_moves_per_pass == 0:
        return None
    if state.last_return_at is not None and ctx.now - state.last_return_at < policy.return_cooldown_seconds:
        return None
    per = lambda o: o.price_per_hour / max(ctx.weight(o.accelerator, o.gpus), EPS)  # noqa: E731
    open_ = [per(o) for o in ctx.plannable if o.market is Market.SPOT and o.capacity_hint != 0]
    if not open_:
        return None
    spot = sorted(
        (i for i in healthy if i.market is Market.SPOT and not i.starting and per(i) > min(open_) + EPS),
        key=lambda i: (-per(i), -i.launched_at, i.id),
    )
    return _saving_move(
        ctx,
        ours,
        healthy,
        od_have,
        spot[: policy.max_moves_per_pass],
        notes,
        "moving {k} spot node(s) to a cheaper pool",
        whole=True,
    )  # one plan per pass


def _spot_moves(
    ctx: _Context, current: Mapping[str, int], have: float, od_have: float
) -> tuple[dict[str, int], float] | None:
    """Spot launches that cover the target without new on-demand and their expected true cost
    per hour (price plus the work interruptions lose, as the planner counts it), or ``None``."""
    offers = []
    for o in ctx.plannable:
        if o.market is Market.ON_DEMAND:
            if not current.get(o.pool.id):
                continue
            o = o.model_copy(update={"capacity_hint": 0})
        offers.append(o)
    p = ctx.plan(offers, current, [])
    if p is None or not p.feasible:
        return None
    adds = _additions(p, current)
    if any(not ctx.spot(pool) for pool in adds):
        return None
    adds = _trim_excess(ctx, adds, have, od_have)
    if have + ctx.add_weight(adds) < ctx.target - EPS:
        return None
    each = {a.offer.pool.id: a.true_cost_per_hour / a.count for a in p.allocations if a.count}
    return adds, sum(each[pool] * n for pool, n in adds.items())
