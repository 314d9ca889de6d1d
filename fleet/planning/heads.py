"""Head planning: the spec's ``head:`` role as its own on-demand allocation beside the workers.

Pure: no I/O. Contract of :func:`add_head`:

* the head is ``spec.head.count`` on-demand instances of one pool, the cheapest offer whose
  vCPUs, memory and GPUs meet ``spec.head`` (an offer that does not report vCPUs or memory
  does not meet a requirement on them); ties go to the pool id, so the choice is stable;
* the place: ``head.provider``/``head.region`` when pinned; otherwise next to the workers,
  in the provider and region of the largest worker share (weighted GPUs). When that place
  has no fitting offer the search widens to the same provider, then to every provider the
  spec allows (unless pinned), and the plan's notes say so. A head that needs no GPU
  takes a CPU-only type wherever the widening finds one before it takes a GPU node;
* a re-plan keeps a running head: a fitting pool in the chosen place where ``current``
  already runs instances is preferred to a cheaper one;
* the workers are planned exactly as without a head (``split`` keeps head-only offers out
  of their candidates); a spec without ``head:`` never reaches this module.

Raises ``PlanError`` when no offer the spec allows meets the head's requirements.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from fleet.catalog import CPU
from fleet.errors import PlanError
from fleet.model import HEAD, Allocation, Market, Offer, Plan
from fleet.spec import FleetSpec, Head


def split(offers: Sequence[Offer]) -> tuple[list[Offer], list[Offer]]:
    """(worker offers, every offer a head may use): CPU-only types are for heads only."""
    return [o for o in offers if o.accelerator != CPU], list(offers)


def fits(head: Head, offer: Offer) -> bool:
    """Whether one node of ``offer`` meets the head's requirements (on-demand only)."""
    if offer.market is not Market.ON_DEMAND or offer.gpus < head.gpus:
        return False
    if head.vcpus > 0 and (offer.vcpus is None or offer.vcpus < head.vcpus):
        return False
    return not (head.memory_gib > 0 and (offer.memory_gib is None or offer.memory_gib < head.memory_gib))


def _allowed(spec: FleetSpec, offer: Offer, blocked: Collection[str]) -> bool:
    settings = spec.provider_settings(offer.pool.provider)
    if settings is None or not settings.on_demand or not settings.allows(offer.pool.region, offer.pool.zone):
        return False
    pool_id = offer.pool.id
    return not any(pool_id == b or pool_id.startswith(b.rstrip("/") + "/") for b in blocked)


def anchor(shares: Iterable[tuple[str, float]]) -> tuple[str, str] | None:
    """(provider, region) of the largest share among ``(pool id, weighted GPUs)`` pairs (the
    workers' allocations or instances); ``None`` when there are none."""
    share: dict[tuple[str, str], float] = {}
    for pool_id, weighted in shares:
        provider, region = pool_id.split("/")[:2]
        share[(provider, region)] = share.get((provider, region), 0.0) + weighted
    if not share:
        return None
    return max(sorted(share), key=lambda k: share[k])


def worker_shares(workers: Plan) -> list[tuple[str, float]]:
    """``(pool id, weighted GPUs)`` of a plan's worker allocations, for :func:`anchor`."""
    return [(a.offer.pool.id, a.weighted_gpus) for a in workers.allocations if a.role != HEAD]


def choose(
    spec: FleetSpec,
    offers: Sequence[Offer],
    near: tuple[str, str] | None,
    current: Mapping[str, int] | None = None,
    blocked: Collection[str] = (),
) -> tuple[Offer, list[str]]:
    """The head's offer and the notes that explain where it went (see the module doc);
    ``near`` is the workers' :func:`anchor`."""
    head = spec.head
    assert head is not None
    current = current or {}
    fitting = [o for o in offers if fits(head, o) and _allowed(spec, o, blocked)]
    provider = head.provider or (near[0] if near else "")
    region = head.region or (near[1] if near and (not head.provider or head.provider == near[0]) else "")
    places = [(provider, region)]
    if not head.region:
        places.append((provider, ""))
    if not head.provider and not head.region:
        places.append(("", ""))
    notes: list[str] = []
    # a CPU-only head goes on a CPU type anywhere allowed before it takes a GPU node nearby
    tiers = [[o for o in fitting if o.gpus == 0], fitting] if head.gpus == 0 else [fitting]
    for tier, (prov, reg) in ((tier, place) for tier in tiers for place in places):
        here = [o for o in tier if (not prov or o.pool.provider == prov) and (not reg or o.pool.region == reg)]
        if not here:
            continue
        best = min(here, key=lambda o: (current.get(o.pool.id, 0) == 0, o.price_per_hour, o.pool.id))
        pinned = bool(head.provider or head.region)
        where = f"{best.pool.provider}/{best.pool.region}"
        if (prov, reg) != places[0]:
            kind = "CPU-only type" if tier is not tiers[-1] else "offer"
            notes.append(
                f"head: no {kind} meets it in {'/'.join(x for x in places[0] if x) or 'the plan'}; "
                f"placed in {where} instead"
            )
        elif not pinned and near:
            notes.append(f"head: placed next to the largest worker share ({where})")
        return best, notes
    want = f"{head.vcpus:g} vCPUs, {head.memory_gib:g} GiB, {head.gpus} GPU(s), on-demand"
    where = "/".join(x for x in (head.provider, head.region) if x)
    raise PlanError(
        f"no offer meets head ({want}){' in ' + where if where else ''}; lower head.vcpus, "
        "head.memory_gib or head.gpus, or change head.provider/head.region"
    )


def add_head(
    spec: FleetSpec,
    workers: Plan,
    offers: Sequence[Offer],
    current: Mapping[str, int] | None = None,
    blocked: Collection[str] = (),
) -> Plan:
    """``workers`` with the head allocation added (role ``head``), its price in the totals."""
    head = spec.head
    assert head is not None
    offer, notes = choose(spec, offers, anchor(worker_shares(workers)), current, blocked)
    price = offer.price_per_hour * head.count
    alloc = Allocation(offer=offer, count=head.count, weighted_gpus=0.0, true_cost_per_hour=price, role=HEAD)
    t = workers.totals
    true_cost = t.true_cost_per_hour + price
    totals = t.model_copy(
        update={
            "price_per_hour": t.price_per_hour + price,
            "true_cost_per_hour": true_cost,
            "true_cost_per_weighted_gpu_hour": true_cost / t.weighted_gpus if t.weighted_gpus > 0 else 0.0,
        }
    )
    return workers.model_copy(
        update={"allocations": (alloc, *workers.allocations), "totals": totals, "notes": (*workers.notes, *notes)}
    )
