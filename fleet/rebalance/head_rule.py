"""The head rule of ``decide``: the head stays on-demand, and a lost head is an incident.

Pure. :func:`decide_with_head` runs the worker rules on the workers alone (head nodes are
neither capacity nor candidates for a move to spot), then checks the head: when fewer than
``head.count`` head nodes are alive it asks for the missing ones on-demand (reason
``head-lost``, the cheapest fitting offer next to the workers, as ``fleet plan`` places it)
and records an incident that says so loudly. Head nodes are never terminated by a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from fleet.errors import PlanError
from fleet.model import HEAD, Offer
from fleet.planning import heads
from fleet.rebalance.types import Decision, Launch, ObservedInstance
from fleet.spec import FleetSpec


def decide_with_head(
    spec: FleetSpec,
    offers: Sequence[Offer],
    instances: Sequence[ObservedInstance],
    decide_workers: Callable[[FleetSpec, Sequence[Offer], Sequence[ObservedInstance]], Decision],
) -> Decision:
    """``decide_workers`` on the workers, plus the head rule (see the module doc)."""
    assert spec.head is not None
    worker_offers, head_offers = heads.split(offers)
    head_nodes = [i for i in instances if i.ours and i.role == HEAD]
    workers = [i for i in instances if not (i.ours and i.role == HEAD)]
    decision = decide_workers(spec.model_copy(update={"head": None}), worker_offers, workers)
    missing = spec.head.count - len(head_nodes)
    if missing <= 0:
        return decision
    near = heads.anchor((i.pool, spec.weight(i.accelerator) * i.gpus) for i in workers if i.ours)
    current = {i.pool: 1 for i in head_nodes}
    lost = f"INCIDENT: {missing} of {spec.head.count} head node(s) of fleet {spec.name!r} lost"
    try:
        offer, notes = heads.choose(spec, head_offers, near, current)
    except PlanError as err:
        return replace(decision, incidents=(*decision.incidents, f"{lost}; cannot relaunch: {err}"))
    launch = Launch(offer, missing, "head-lost")
    return replace(
        decision,
        actions=(launch, *decision.actions),
        notes=(*decision.notes, *notes),
        incidents=(
            *decision.incidents,
            f"{lost}; relaunching on-demand in {offer.pool.id}; workers may stall until it is back",
        ),
    )
