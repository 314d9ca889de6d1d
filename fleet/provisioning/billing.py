"""Reading back what the providers bill for the fleet's instances, and recording it beside the plan.

The planner prices a fleet from offers; a provider may then bill something else (a Vast host
that changed its price, an interruptible bid that came up on-demand, an EC2 zone whose spot
price moved between the offer and the launch). ``read_back`` asks each provider that has the
ability ``providers.base.ReadsBilledRate`` what it charges for the given instances and records
the answers in the store (``StateStore.record_billed``), one call per provider.

Contract: never raises ``ProviderError`` (a provider whose answer cannot be read is skipped,
logged, and tried again on the next reconcile: its instances keep ``billed_per_hour`` NULL,
which every view shows as "not read", never as a price); rates are recorded only for
instances of this fleet the store knows. Called by ``fleet.provisioning.reconcile.sync``
(after each launch round's look, and whenever a fleet is reconciled) for the alive instances
not read yet, and by the rebalancer with ``refresh`` for all of them (a re-bid changes a bill).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from fleet.errors import ProviderError
from fleet.model import BilledRate, Instance
from fleet.state import StateStore
from providers.base import Provider, ReadsBilledRate

log = logging.getLogger(__name__)


def read_back(
    store: StateStore, providers: Mapping[str, Provider], fleet: str, instances: Iterable[Instance]
) -> dict[str, BilledRate]:
    """Ask each provider of ``instances`` that can tell what it bills for them; record and return
    what it said (instance id -> rate). See the module doc."""
    by_provider: dict[str, list[Instance]] = {}
    for inst in instances:
        by_provider.setdefault(inst.pool.provider, []).append(inst)
    found: dict[str, BilledRate] = {}
    for name, group in sorted(by_provider.items()):
        provider = providers.get(name)
        if not isinstance(provider, ReadsBilledRate):
            continue
        try:
            rates = provider.billed_rates(group)
        except ProviderError as err:
            log.warning(
                "%s: cannot read what it bills for fleet %s (%s); trying again on the next look", name, fleet, err
            )
            continue
        asked = {i.id for i in group}
        found.update({iid: rate for iid, rate in rates.items() if iid in asked})
    if found:
        store.record_billed(fleet, found)
    return found


def unread(store: StateStore, fleet: str, alive: Iterable[Instance]) -> list[Instance]:
    """Those of ``alive`` whose record has no billed rate yet (and which the store knows)."""
    missing = {r.id for r in store.instances(fleet, alive_only=True) if r.billed_per_hour is None}
    return [i for i in alive if i.id in missing]
