"""Applying a plan: the ONLY code that calls ``provider.launch`` and ``provider.terminate``.

``apply(plan, providers, store)`` makes the providers hold ``plan.counts()`` for the
fleet, with the providers as the source of truth:

* it diffs desired counts per pool against ``list_instances(fleet)``, launches the
  shortfall of every pool in parallel and terminates surplus of this fleet only
  (instances without this fleet's tag are never touched, whatever a provider returns);
* every launch is recorded with an idempotency token (fleet, plan id, pool, sequence
  number and a random part drawn once per ``apply``) *before* the provider is called; a
  launch left unfinished by a crash is replayed with its own recorded token, so a rerun
  after ``kill -9`` converges without duplicates, while a store that was lost or rebuilt
  (sequence numbers restart at 1) never repeats a token the provider already used;
* partial success is normal. A capacity shortfall blocks that pool for a few minutes,
  a quota error blocks ``provider/region``, an auth error blocks the provider (blocks
  live in the store, on the provider's clock); then ``replan(current, blocked)`` moves
  only the shortfall to the next-best pools. Throttling and 5xx (already retried by the
  adapter) are reported in one line; the launch stays replayable for the next run.

Returns an ``ApplyReport``: what launched, what failed and why, the final shortfall.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from fleet import crashpoints
from fleet.errors import PlanError, ProviderError
from fleet.model import HEAD, TAG_FLEET, Instance, InstanceState, NodeConfig, Plan, interconnect_group
from fleet.provisioning.launching import LaunchOutcome, PoolLauncher, Progress, ProgressFn
from fleet.provisioning.reconcile import Observation, observe, on_demand_prices, sync
from fleet.state import EventKind, StateStore
from providers.base import Provider

#: How long (provider-clock seconds) each kind of failure blocks what it blocks.
BLOCK_SECONDS = {"capacity": 180.0, "quota": 1800.0, "auth": 1800.0}
MAX_ROUNDS = 4

Replan = Callable[[Mapping[str, int], Collection[str]], Plan]


@dataclass
class ApplyReport:
    fleet: str
    plan: Plan  # the plan finally applied (after any re-plans)
    launched: list[Instance] = field(default_factory=list)
    terminated: list[str] = field(default_factory=list)
    failures: list[LaunchOutcome] = field(default_factory=list)
    blocked: list[tuple[str, str]] = field(default_factory=list)  # (prefix, reason)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # alive per pool at the end
    missing: dict[str, int] = field(default_factory=dict)  # plan count - alive, where short
    rounds: int = 0

    @property
    def ok(self) -> bool:
        return not self.missing and self.plan.feasible

    @property
    def missing_weighted_gpus(self) -> float:
        per = {a.offer.pool.id: a.weighted_gpus / a.count for a in self.plan.allocations if a.count}
        return sum(per.get(p, 0.0) * n for p, n in self.missing.items())

    def to_dict(self) -> dict[str, object]:
        heads = {a.offer.pool.id: a.count for a in self.plan.role_allocations(HEAD)}
        return {
            **({"head": heads} if heads else {}),
            "fleet": self.fleet,
            "plan_id": self.plan.id,
            "ok": self.ok,
            "feasible": self.plan.feasible,
            "launched": [i.id for i in self.launched],
            "terminated": self.terminated,
            "failures": [f.to_dict() for f in self.failures],
            "blocked": [{"prefix": p, "reason": r} for p, r in self.blocked],
            "notes": self.notes,
            "counts": self.counts,
            "desired": self.plan.counts(),
            "missing": self.missing,
            "missing_weighted_gpus": self.missing_weighted_gpus,
            "rounds": self.rounds,
        }


def launch_token(fleet: str, plan_id: str, pool: str, seq: int, incarnation: str = "") -> str:
    """The idempotency token of launch ``seq`` of ``pool`` under ``plan_id`` (ASCII, 35 chars).

    ``incarnation`` is random per ``apply`` run (``new_incarnation()``): the sequence numbers
    restart when the store is lost, and the provider would answer a repeated token with the
    instances it made for it before (terminated ones included), so a new launch must never
    repeat an old token. Replays read the token recorded with the launch instead."""
    key = f"{fleet}|{plan_id}|{pool}|{seq}" + (f"|{incarnation}" if incarnation else "")
    return "sf-" + hashlib.sha256(key.encode()).hexdigest()[:32]


def new_incarnation() -> str:
    """A random part for this run's launch tokens (64 bits)."""
    return secrets.token_hex(8)


def apply(
    plan: Plan,
    providers: Mapping[str, Provider],
    store: StateStore,
    *,
    progress: ProgressFn | None = None,
    replan: Replan | None = None,
    node: NodeConfig | None = None,
    max_rounds: int = MAX_ROUNDS,
    max_workers: int = 32,
    observed: Observation | None = None,
    role_nodes: Mapping[str, NodeConfig] | None = None,
) -> ApplyReport:
    """Make the providers hold ``plan.counts()`` for ``plan.fleet``; see the module doc.

    ``observed``: a look the caller just took and synced into ``store`` (saves listing
    again). ``role_nodes``: what the nodes of a role other than ``worker`` run (``head``);
    ``node`` is what the workers run. Raises only ``StateError`` (the store failed); provider failures are in the report.
    """
    say = progress or (lambda _p: None)
    fleet = plan.fleet
    report = ApplyReport(fleet=fleet, plan=plan)
    incarnation = new_incarnation()
    launcher = PoolLauncher(
        fleet,
        providers,
        store,
        node=node,
        say=say,
        role_nodes=role_nodes,
        token=lambda f, plan_id, pool, seq: launch_token(f, plan_id, pool, seq, incarnation),
    )
    store.save_plan(plan)
    blocked_now: set[str] = set()
    current = plan
    for round_no in range(1, max_rounds + 1):
        report.rounds = round_no
        store.refresh_lock(fleet)
        if round_no == 1 and observed is not None:
            obs = observed
            _note_unread(obs, report)
        else:
            obs = _look(providers, store, current, report)
        desired = current.counts()
        say(
            Progress(
                "round",
                count=sum(min(n, desired.get(p, 0)) for p, n in obs.counts().items()),
                total=sum(desired.values()),
                message=f"round {round_no}",
            )
        )
        offers = {a.offer.pool.id: a.offer for a in current.allocations}
        launcher.roles = {a.offer.pool.id: a.role for a in current.allocations if a.count > 0}
        launcher.interconnect = _interconnect(current)
        outcomes = launcher.run(current.id, desired, offers, obs, replay=round_no == 1, max_workers=max_workers)
        crashpoints.reached("round-launched")
        new_blocks = _settle(outcomes, report, store, providers, obs, say)
        blocked_now |= set(new_blocks)
        if not new_blocks or replan is None or round_no == max_rounds:
            break
        after = observe(providers, fleet)
        active = blocked_now | _active_blocks(store, providers)
        say(Progress("replan", message=f"re-planning the shortfall without {', '.join(sorted(new_blocks))}"))
        try:
            nxt = replan(after.counts(), sorted(active))
        except PlanError as err:
            report.notes.append(f"no pool left to move the shortfall to: {err}")
            say(Progress("note", message=report.notes[-1]))
            break
        store.save_plan(nxt)
        crashpoints.reached("replanned")
        if nxt.counts() == current.counts():
            break
        current = nxt
    report.plan = current
    final = _look(providers, store, current, report)
    _terminate_surplus(current, final, providers, store, report, say)
    final = _look(providers, store, current, report) if report.terminated else final
    report.counts = final.counts()
    report.missing = {
        p: n - report.counts.get(p, 0) for p, n in current.counts().items() if report.counts.get(p, 0) < n
    }
    crashpoints.reached("surplus-done")
    previous = store.latest_plan(fleet, applied_only=True)
    store.mark_plan_applied(fleet, current.id)
    if report.launched or report.terminated or previous is None or previous.id != current.id:
        store.record_event(
            fleet,
            EventKind.PLAN_APPLIED,
            detail={"plan": current.id, "missing": report.missing},
            ts=max(final.now.values(), default=None),
        )
    return report


def _look(providers: Mapping[str, Provider], store: StateStore, plan: Plan, report: ApplyReport) -> Observation:
    obs = observe(providers, plan.fleet)
    _note_unread(obs, report)
    sync(store, obs, prices=on_demand_prices([plan]))
    return obs


def _note_unread(obs: Observation, report: ApplyReport) -> None:
    """One note per provider ``obs`` could not list (once per run)."""
    for name, error in obs.errors.items():
        note = f"{name}: could not list instances ({error}); its pools were left alone"
        if note not in report.notes:
            report.notes.append(note)


def _active_blocks(store: StateStore, providers: Mapping[str, Provider]) -> set[str]:
    clocks: dict[str, float] = {}
    out = set()
    for b in store.blocks():
        if b.provider not in clocks and b.provider in providers:
            clocks[b.provider] = providers[b.provider].now()
        if b.until > clocks.get(b.provider, 0.0):
            out.add(b.prefix)
    return out


def active_blocks(store: StateStore, providers: Mapping[str, Provider]) -> list[str]:
    """Pool-id prefixes blocked now (each compared with its provider's clock), for the planner."""
    return sorted(_active_blocks(store, providers))


def _settle(
    outcomes: list[LaunchOutcome],
    report: ApplyReport,
    store: StateStore,
    providers: Mapping[str, Provider],
    obs: Observation,
    say: ProgressFn,
) -> list[str]:
    """Fold launch outcomes into the report; block what failed; return prefixes newly blocked."""
    new_blocks: list[str] = []
    for out in outcomes:
        report.launched.extend(out.instances)
        if not out.error_kind:
            continue
        report.failures.append(out)
        prefix = _block_prefix(out)
        if prefix is None:
            line = f"{out.pool}: {out.error_message or out.error_kind} (will retry on the next run)"
            report.notes.append(line)
            say(Progress("note", pool=out.pool, message=line))
            continue
        provider = prefix.split("/", 1)[0]
        until = obs.clock(provider) + BLOCK_SECONDS[out.error_kind]
        store.block(prefix, until=until, reason=f"{out.error_kind}: {out.error_message}"[:300])
        store.record_event(
            report.fleet,
            EventKind.BLOCKED,
            pool=prefix,
            detail={"kind": out.error_kind, "message": out.error_message, "until": until},
            ts=obs.clock(provider),
        )
        if prefix not in [p for p, _ in report.blocked]:
            report.blocked.append((prefix, out.error_kind))
            new_blocks.append(prefix)
            say(Progress("block", pool=prefix, message=f"{out.error_kind}: {out.error_message}"))
    return new_blocks


def _block_prefix(out: LaunchOutcome) -> str | None:
    parts = out.pool.split("/")
    return {"capacity": out.pool, "quota": "/".join(parts[:2]), "auth": parts[0]}.get(out.error_kind)


def _terminate_surplus(
    plan: Plan,
    obs: Observation,
    providers: Mapping[str, Provider],
    store: StateStore,
    report: ApplyReport,
    say: ProgressFn,
) -> None:
    desired = plan.counts()
    doomed: dict[str, list[Instance]] = {}
    for pool_id, insts in obs.by_pool().items():
        extra = len(insts) - desired.get(pool_id, 0)
        if extra <= 0:
            continue
        # pending before running, newest first: the least work is lost
        insts = sorted(insts, key=lambda i: (i.state is InstanceState.RUNNING, -i.launched_at, i.id))
        for inst in insts[:extra]:
            if inst.tags.get(TAG_FLEET) == plan.fleet:
                doomed.setdefault(inst.pool.provider, []).append(inst)
    for name, insts in sorted(doomed.items()):
        say(Progress("terminate", pool=name, count=len(insts), message=f"terminating {len(insts)} surplus on {name}"))
        try:
            report.terminated.extend(terminate(plan.fleet, providers[name], insts, store, reason="surplus"))
        except ProviderError as err:
            report.notes.append(f"{name}: could not terminate {len(insts)} surplus instance(s): {err}")


def _interconnect(plan: Plan) -> str:
    """The low-latency group ``plan``'s workers join: a zone-level coupled plan names the
    provider feature it wants (``PlacementChoice.interconnect``); "" otherwise."""
    c = plan.placement
    return interconnect_group(plan.fleet, c.domain) if c is not None and c.interconnect else ""


def may_break(replacements: Collection[str], alive: Collection[str], ready: Collection[str]) -> bool | None:
    """Make before break, the one rule the rebalancer and the simulator apply to a node that is
    replaced: it may be terminated (``True``) once every replacement is ready; it waits
    (``False``) while one is alive but still starting; the termination is dropped (``None``: the
    node is kept) when a replacement is gone (it failed to come up, or was lost first). No
    replacement named means nothing has to come up first."""
    if any(r not in alive for r in replacements):
        return None
    return all(r in ready for r in replacements)


def terminate(
    fleet: str, provider: Provider, instances: list[Instance], store: StateStore | None, *, reason: str
) -> list[str]:
    """Terminate ``instances`` (only those tagged with ``fleet``) and record it (unless ``store``
    is None: an unreadable record); returns the ids terminated. Raises ``ProviderError`` when
    the provider refuses (nothing is recorded then)."""
    ours = [i for i in instances if i.tags.get(TAG_FLEET) == fleet]
    if not ours:
        return []
    provider.terminate([i.id for i in ours])
    crashpoints.reached("terminate-sent")
    now = provider.now()
    if store is None:
        return [i.id for i in ours]
    store.end_instances(fleet, {i.id: (now, EventKind.TERMINATED) for i in ours})
    store.record_events((fleet, EventKind.TERMINATED, i.id, i.pool.id, {"reason": reason}, now) for i in ours)
    return [i.id for i in ours]
