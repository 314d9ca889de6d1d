"""One ``fleet rebalance`` pass on a recorded fleet, and what ``--watch`` compares between looks.

``rebalance_pass`` opens the store, reads the fleet's record (a fleet taken down is left down:
``None``), its spec and providers, gathers the offers (``fleet.operations.offers``) and runs
``fleet.rebalance.cycle.run_pass`` under the fleet's lock (``dry_run``: without the lock, writing
nothing). Replacements run what ``fleet up`` gave the nodes (``environ``). ``fingerprint`` is
what ``--watch`` compares between looks (it also records what the providers' interruption queues
brought). The loop around them (``--every``, ``--watch``, metrics) is the face's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from fleet.errors import FleetError
from fleet.operations.offers import offers_for
from fleet.operations.workspace import Workspace, providers_of, spec_of, store_of
from fleet.rebalance.cycle import PassReport, run_pass
from fleet.state import FleetStatus


def rebalance_pass(
    name: str, where: Workspace, *, dry_run: bool = False, environ: Mapping[str, str] = os.environ
) -> PassReport | None:
    """One pass; ``None`` when the fleet was taken down (a rebalancer never brings it back)."""
    store = store_of(where)
    try:
        record = store.get_fleet(name)
        if record.status == FleetStatus.DOWN:
            return None
        spec = spec_of(record)
        if spec is None:
            raise FleetError(f"fleet {name!r} has no recorded spec; run `fleet repair {name} --spec SPEC`")
        providers = providers_of(where, record)
        offers, _info = offers_for(spec, where, providers)
        if dry_run:
            return run_pass(spec, offers, providers, store, dry_run=True)
        with store.lock(name, "rebalance"):
            if store.get_fleet(name).status == FleetStatus.DOWN:  # taken down while we looked
                return None
            return run_pass(spec, offers, providers, store, environ=environ)  # replacements run what `up` gave
    finally:
        store.close()


def fingerprint(
    name: str,
    where: Workspace,
    before: object,
    wait: float = 0.0,
    *,
    queue_error: Callable[[str, str], None] | None = None,
) -> object:
    """What ``--watch`` compares between looks: the fleet's alive instance ids and the number of
    interruption notices recorded for it, after recording what the providers' event queues brought
    within ``wait`` seconds (``fleet.rebalance.notices``; a queue that fails is told to
    ``queue_error(provider, error)``) (``before`` when a provider could not be listed: an
    unreadable provider alone does not start a pass; the pass every ``--every`` says why). It is
    taken before each pass, so what a pass launches starts one more pass (nothing to do), and a
    loss during a pass is never missed."""
    from fleet.provisioning.reconcile import observe
    from fleet.rebalance.notices import drain
    from fleet.state import EventKind

    store = store_of(where)
    try:
        record = store.get_fleet(name)
        if record.status == FleetStatus.DOWN:
            return "down"
        providers = providers_of(where, record)
        obs = observe(providers, name)
        if obs.errors:
            return before
        drained = drain(name, providers, obs.instances, store, wait)  # the event queues, long-polled
        for provider, error in sorted(drained.errors.items()):
            if queue_error is not None:
                queue_error(provider, error)
        if drained.news:
            obs = observe(providers, name)
            if obs.errors:
                return before
        return frozenset(i.id for i in obs.instances), len(store.events(name, kinds=[EventKind.NOTICE]))
    finally:
        store.close()
