"""One rebalancing pass: observe, ``decide``, apply through the executor, record each action.

The caller holds the fleet's lock (``fleet rebalance`` does). Contract of :func:`run_pass`:

* it observes the providers, reconciles the store (``sync``) and gathers ``decide``'s inputs
  (``fleet.rebalance.inputs``); with ``dry_run`` it writes nothing and returns the decision;
* launches go through ``fleet.provisioning.executor.apply`` with a plan that holds every alive
  instance plus the launches, so the executor's tokens make a rerun after ``kill -9``
  converge without duplicates (a pass with nothing to launch still lets the executor settle
  launches a killed run left unfinished); a capacity failure is blocked by the executor and the
  shortfall re-decided within the pass (the failing pool then sits in the back-off);
* bid raises go to the provider's ``raise_bid(instance_id, bid)`` where it has one (else the
  action is recorded as not supported); terminations come last, through
  ``executor.terminate``, and only when every pool named in ``Terminate.after`` came up;
* every action is recorded as one ``rebalance`` event (``fleet history`` shows it) with
  ``done`` true or false and the reason, and the fleet's status becomes up or short;
* every alive instance's bill is read again and held to the budget (``fleet.rebalance.capping``:
  ``budget.cap_action`` warns, replaces through ``decide`` with an ``over-bill`` notice, or
  destroys and replaces within the pass);
* a provider that could not be read (``Observation.errors``: a failed or malformed listing) may
  run what a launch would replace: such a pass takes no action at all (launches, bid raises and
  terminations are dropped from the decision, with a note), leaves the fleet's status as it was
  and names the provider in ``PassReport.unread``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from fleet import crashpoints
from fleet.errors import ProviderError
from fleet.model import HEAD, TAG_ROLE, WORKER, Allocation, Market, NodeConfig, Offer, Plan, PlanTotals
from fleet.provisioning.executor import ApplyReport, apply, may_break, terminate
from fleet.provisioning.launching import ProgressFn
from fleet.provisioning.reconcile import Observation, observe, sync
from fleet.provisioning.roles import fleet_node, head_node, worker_node
from fleet.rebalance import capping
from fleet.rebalance.capping import CapCheck
from fleet.rebalance.inputs import EVENT_KIND, gather
from fleet.rebalance.types import Action, Decision, Launch, PoolEvent, RaiseBid, Terminate
from fleet.secrets import resolve_env
from fleet.spec import FleetSpec
from fleet.state import EventKind, FleetStatus, LaunchStatus, StateStore
from providers.base import Provider, RaisesBids


@dataclass
class ActionResult:
    """One action and what came of it (``done``: it took effect; ``message``: why not)."""

    action: Action
    done: bool
    message: str = ""

    def to_dict(self) -> dict[str, object]:
        return {**self.action.to_dict(), "done": self.done, "message": self.message}


@dataclass
class PassReport:
    fleet: str
    decision: Decision
    dry_run: bool
    results: list[ActionResult] = field(default_factory=list)
    running_weighted_gpus: float = 0.0
    running: dict[tuple[str, str], float] = field(default_factory=dict)  # (provider, market) -> weighted GPUs
    price_per_hour: float = 0.0
    interruptions: int = 0  # spot losses this pass recorded
    baseline_weighted_gpus: float = 0.0
    critical_weighted_gpus: float = 0.0
    notes: list[str] = field(default_factory=list)
    unread: dict[str, str] = field(default_factory=dict)  # provider -> why it could not be read
    bill_breaches: list[dict[str, object]] = field(default_factory=list)  # instances billed beyond the budget
    now: float = 0.0  # the providers' clock at the pass

    @property
    def nothing_to_do(self) -> bool:
        return not self.decision.actions

    @property
    def at_target(self) -> bool:
        return self.running_weighted_gpus >= self.decision.target_weighted_gpus - 1e-9

    def to_dict(self) -> dict[str, object]:
        return {
            "fleet": self.fleet,
            "dry_run": self.dry_run,
            "decision": self.decision.to_dict(),
            "results": [r.to_dict() for r in self.results],
            "at_target": self.at_target,
            "running_weighted_gpus": self.running_weighted_gpus,
            "price_per_hour": self.price_per_hour,
            "running": [{"provider": p, "market": m, "weighted_gpus": w} for (p, m), w in sorted(self.running.items())],
            "interruptions": self.interruptions,
            "notes": self.notes,
            "provider_errors": self.unread,
            "bill_breaches": self.bill_breaches,
        }


def run_pass(
    spec: FleetSpec,
    offers: Sequence[Offer],
    providers: Mapping[str, Provider],
    store: StateStore | None,
    *,
    dry_run: bool = False,
    progress: ProgressFn | None = None,
    environ: Mapping[str, str] | None = None,
) -> PassReport:
    """One pass over ``spec``'s fleet; see the module doc. ``store`` may be ``None`` only for a dry run.

    Replacements run what ``fleet up``'s nodes run (``roles.fleet_node``): ``spec.node`` with its
    ``${env:NAME}`` references resolved from ``environ`` and the checkpoint URI, worked out only
    when the pass launches something. ``environ`` ``None``: the spec's node as written, no
    checkpoint URI (tests that launch on the local cloud)."""
    from fleet.rebalance.decision import decide

    obs = observe(providers, spec.name)
    lost = 0
    capped = CapCheck()
    if not dry_run:
        assert store is not None
        lost = sum(1 for _rec, reason in sync(store, obs, refresh_bills=True).ended if reason == EventKind.PREEMPTED)
        if not obs.errors:
            capped = capping.check(spec, store, obs, providers, max(obs.now.values(), default=0.0))
            if capped.destroyed:
                obs = observe(providers, spec.name)
                sync(store, obs)
    inputs = gather(obs, store, providers)

    def decide_now(o: Observation, extra: Collection[PoolEvent] = ()) -> Decision:
        i = gather(o, store, providers) if o is not obs else inputs
        observed = [
            replace(x, notice=capped.notices[x.id]) if x.id in capped.notices and not x.notice else x
            for x in i.instances
        ]
        return decide(
            spec,
            offers,
            observed,
            [*i.events, *capped.events, *extra],
            i.now,
            i.state,
            exposure=i.exposure,
            bidding=i.bidding,
        )

    decision = decide_now(obs)
    if obs.errors:  # what runs there is not known: any launch could double it, any termination strand it
        decision = replace(
            decision,
            actions=(),
            notes=(
                *decision.notes,
                *(
                    f"{name} could not be read ({error}): this pass launched, re-bid and terminated nothing"
                    for name, error in sorted(obs.errors.items())
                ),
            ),
        )
    report = PassReport(
        fleet=spec.name,
        decision=decision,
        dry_run=dry_run,
        interruptions=lost,
        baseline_weighted_gpus=float(spec.capacity.on_demand_gpus),
        critical_weighted_gpus=spec.critical_gpus,
        unread=dict(obs.errors),
    )
    report.bill_breaches = [b.to_dict() for b in capped.breaches]
    report.now = inputs.now
    report.results += [ActionResult(term, done, message) for term, done, message in capped.destroyed]
    _running(spec, obs, report)
    if dry_run or store is None or obs.errors:
        return report
    crashpoints.reached("rebalance-decided")
    for incident in decision.incidents:  # a lost head: in the fleet's history, not only on screen
        store.record_event(spec.name, HEAD_LOST, detail={"message": incident}, ts=inputs.now)
    launches = decision.launches
    apply_report = None
    # unfinished launches of a run killed mid-pass are replayed or abandoned by the executor
    if launches or store.launches(spec.name, status=LaunchStatus.REQUESTED):

        def replan(_current: Mapping[str, int], blocked: Collection[str]) -> Plan:
            again = observe(providers, spec.name)
            events = [PoolEvent(b, "no-capacity", inputs.now) for b in blocked if b.count("/") == 4]
            redo = decide_now(again, events)
            for launch in redo.launches:
                if launch not in launches:
                    launches.append(launch)
            return plan_of(spec, redo, again)

        node, role_nodes = nodes_for(spec, obs, providers, environ)
        apply_report = apply(
            plan_of(spec, decision, obs),
            providers,
            store,
            progress=progress,
            replan=replan,
            node=node,
            observed=obs,
            role_nodes=role_nodes,
        )
        report.notes += apply_report.notes
    report.results += _launch_results(launches, apply_report)
    for bid in decision.bids:
        report.results.append(_raise_bid(bid, providers))
    came_up = {r.action.pool for r in report.results if isinstance(r.action, Launch) and r.done}
    by_id = {i.id: i for i in observe(providers, spec.name).instances} if decision.terminations else {}
    for term in decision.terminations:
        report.results.append(_terminate(spec.name, term, came_up, by_id, providers, store))
    _record(store, spec.name, report.results, inputs.now)
    final = observe(providers, spec.name)
    sync(store, final)
    _running(spec, final, report)
    if report.results:
        done = plan_of(spec, decision, final, with_launches=False)
        store.save_plan(done)
        store.mark_plan_applied(spec.name, done.id)
    store.set_status(spec.name, FleetStatus.UP if report.at_target else FleetStatus.SHORT)
    return report


def _running(spec: FleetSpec, obs: Observation, report: PassReport) -> None:
    """What runs now, per provider and market, and its price, into ``report``."""
    report.running = {}
    for i in obs.instances:
        key = (i.pool.provider, i.pool.market.value)
        report.running[key] = report.running.get(key, 0.0) + spec.weight(i.accelerator) * i.gpus
    report.running_weighted_gpus = sum(report.running.values())
    report.price_per_hour = sum(i.price_per_hour for i in obs.instances)


#: Event kind recorded when a pass finds the head lost.
HEAD_LOST = "head-lost"


def nodes_for(
    spec: FleetSpec, obs: Observation, providers: Mapping[str, Provider], environ: Mapping[str, str] | None
) -> tuple[NodeConfig, dict[str, NodeConfig] | None]:
    """What replacement workers (and a relaunched head) run (see :func:`run_pass` for
    ``environ``): with a head, workers get the address of the oldest running head node, as
    ``fleet up`` gives it."""
    node = (
        fleet_node(spec, providers, environ)
        if environ is not None
        else NodeConfig(**spec.node.model_dump(exclude={"forward_credentials"}))
    )
    if spec.head is None:
        return node, None
    head_env = resolve_env(spec.head.env, environ) if environ is not None else spec.head.env
    role_nodes = {HEAD: head_node(spec, head_env, node.checkpoint_uri, node)}
    running = sorted(
        (i for i in obs.instances if i.tags.get(TAG_ROLE) == HEAD and i.address), key=lambda i: (i.launched_at, i.id)
    )
    return (worker_node(spec, node, running[0]) if running else node), role_nodes


def plan_of(spec: FleetSpec, decision: Decision, obs: Observation, *, with_launches: bool = True) -> Plan:
    """The plan the executor applies: every alive instance of ``obs`` stays, plus the launches."""
    counts = obs.counts()
    offers = {o.pool.id: o for o in decision.offers}
    head_pools = {i.pool.id for i in obs.instances if i.tags.get(TAG_ROLE) == HEAD}
    head_pools |= {launch.pool for launch in decision.launches if launch.reason == "head-lost"}
    for inst in obs.instances:
        offers.setdefault(
            inst.pool.id,
            Offer(
                pool=inst.pool,
                accelerator=inst.accelerator,
                gpus=inst.gpus,
                price_per_hour=inst.price_per_hour,
                source="observed",
            ),
        )
    for launch in decision.launches if with_launches else ():
        counts[launch.pool] = counts.get(launch.pool, 0) + launch.count
        offers[launch.pool] = launch.offer
    allocations = tuple(
        Allocation(
            offer=offers[p],
            count=n,
            weighted_gpus=spec.weight(offers[p].accelerator) * offers[p].gpus * n,
            true_cost_per_hour=offers[p].price_per_hour * n,
            role=HEAD if p in head_pools else WORKER,
        )
        for p, n in sorted(counts.items())
        if n > 0
    )
    weighted = sum(a.weighted_gpus for a in allocations)
    price = sum(a.true_cost_per_hour for a in allocations)
    short = decision.short_weighted_gpus if with_launches else max(0.0, decision.target_weighted_gpus - weighted)
    return Plan(
        fleet=spec.name,
        spec_hash=spec.spec_hash(),
        strategy="rebalance",
        allocations=allocations,
        totals=PlanTotals(
            gpus=sum(a.offer.gpus * a.count for a in allocations),
            weighted_gpus=weighted,
            target_weighted_gpus=decision.target_weighted_gpus,
            on_demand_weighted_gpus=sum(a.weighted_gpus for a in allocations if a.offer.market is Market.ON_DEMAND),
            price_per_hour=price,
            true_cost_per_hour=price,
            true_cost_per_weighted_gpu_hour=price / weighted if weighted else 0.0,
            expected_interruptions_per_day=24 * sum(a.offer.interruptions_per_hour * a.count for a in allocations),
            pools=len(allocations),
        ),
        feasible=short <= 1e-9,
        shortfall=f"{short:g} weighted GPUs short (spot short; on-demand only up to the critical level)"
        if short > 1e-9
        else "",
        notes=decision.notes,
    )


def _launch_results(launches: list[Launch], report: ApplyReport | None) -> list[ActionResult]:
    """Each launch is done when its pool gained as many instances as it asked for."""
    if report is None:
        return [ActionResult(launch, False, "not applied") for launch in launches]
    gained: dict[str, int] = {}
    for inst in report.launched:
        gained[inst.pool.id] = gained.get(inst.pool.id, 0) + 1
    out = []
    for launch in launches:
        got = min(gained.get(launch.pool, 0), launch.count)
        gained[launch.pool] = gained.get(launch.pool, 0) - got
        if got == launch.count:
            out.append(ActionResult(launch, True))
            continue
        failure = next((f for f in report.failures if f.pool == launch.pool), None)
        why = failure.error_message or failure.error_kind if failure else "not launched"
        out.append(ActionResult(launch, False, f"{got} of {launch.count} came up: {why}"))
    return out


def _raise_bid(bid: RaiseBid, providers: Mapping[str, Provider]) -> ActionResult:
    provider = providers.get(bid.pool.split("/", 1)[0])
    if not isinstance(provider, RaisesBids):
        return ActionResult(bid, False, "this provider adapter cannot raise bids yet")
    try:
        provider.raise_bid(bid.instance_id, bid.bid)
    except ProviderError as err:
        return ActionResult(bid, False, str(err))
    return ActionResult(bid, True)


def _terminate(
    fleet: str,
    term: Terminate,
    came_up: set[str],
    alive: Mapping[str, object],
    providers: Mapping[str, Provider],
    store: StateStore,
) -> ActionResult:
    if may_break(term.after, came_up, came_up) is None:  # a pass waits for its launches: up or failed
        waiting = [p for p in term.after if p not in came_up]
        return ActionResult(term, False, f"kept: its replacement in {waiting[0]} did not come up")
    inst = alive.get(term.instance_id)
    if inst is None:
        return ActionResult(term, False, "already gone")
    try:
        terminate(fleet, providers[term.pool.split("/", 1)[0]], [inst], store, reason=term.reason)  # type: ignore[list-item]
    except ProviderError as err:
        return ActionResult(term, False, str(err))
    crashpoints.reached("rebalance-terminated")
    return ActionResult(term, True)


def _record(store: StateStore, fleet: str, results: list[ActionResult], now: float) -> None:
    store.record_events(
        (
            fleet,
            EVENT_KIND,
            getattr(r.action, "instance_id", ""),
            r.action.pool,
            {k: v for k, v in r.to_dict().items() if k not in ("pool", "instance")},
            now,
        )
        for r in results
    )
