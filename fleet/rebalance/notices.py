"""Notices from the providers' event queues into the fleet's history, for the watching rebalancer.

:func:`drain` asks each provider that delivers notices to a queue the fleet owns
(``providers.base.ReportsInterruptions``; AWS with ``rebalance.interruption_queue``) for what
arrived in the regions the fleet runs in, and records each notice about one of the fleet's alive
instances as an ``interruption-notice`` event, as the node agent does (``kind`` ``terminate``,
``stop``, ``hibernate`` or ``rebalance``; ``source`` ``queue``). ``decide`` then treats it like
any notice: the instance stops counting (advice: it is replaced first, then ended) and its
replacement launches in the same pass. A notice the history already holds for that instance and
kind is not recorded twice; an ``ended`` notice records nothing (the listing shows the loss) but
still counts as news. A provider whose queue cannot be read is named in the result, not raised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fleet.errors import ProviderError
from fleet.model import Instance
from fleet.state import EventKind, StateStore
from providers.base import Provider, ReportsInterruptions

#: The kind a notice of an instance already ending has; it records nothing.
ENDED = "ended"


@dataclass
class Drained:
    """What one :func:`drain` found: notices recorded, news (anything about the fleet's
    instances, recorded or not) and providers whose queue could not be read."""

    recorded: int = 0
    news: int = 0
    errors: dict[str, str] = field(default_factory=dict)


def drain(
    fleet: str, providers: Mapping[str, Provider], instances: Sequence[Instance], store: StateStore, wait_seconds: float
) -> Drained:
    """Poll every queue-reporting provider for ``fleet``'s notices and record them; see the module doc."""
    out = Drained()
    alive = {i.id: i for i in instances}
    for name, provider in sorted(providers.items()):
        if not isinstance(provider, ReportsInterruptions):
            continue
        regions = sorted({i.pool.region for i in instances if i.pool.provider == name})
        try:
            notices = provider.poll_interruptions(fleet, regions, wait_seconds)
        except ProviderError as err:
            out.errors[name] = str(err)
            continue
        known = {(e.instance_id, str(e.detail.get("kind", ""))) for e in store.events(fleet, kinds=[EventKind.NOTICE])}
        rows = []
        for n in notices:
            out.news += 1
            inst = alive.get(n.instance_id)
            if n.kind == ENDED or inst is None or (n.instance_id, n.kind) in known:
                continue
            known.add((n.instance_id, n.kind))
            rows.append(
                (
                    fleet,
                    EventKind.NOTICE,
                    n.instance_id,
                    inst.pool.id,
                    {"kind": n.kind, "source": "queue", "region": n.region},
                    n.at or None,
                )
            )
        store.record_events(rows)
        out.recorded += len(rows)
    return out
