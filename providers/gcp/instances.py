"""A fleet's VMs on Compute Engine: labels and metadata, listing, terminating.

Every VM spotfleet creates carries labels (``spotfleet-fleet``, ``spotfleet-pool`` = the pool's
short hash, ``spotfleet-plan``, ``spotfleet-token``) for filtering, and its exact tags (which
labels cannot hold: ``/`` and ``:``) as JSON in the ``spotfleet-tags`` metadata item. An
instance id is ``<zone>/<name>``: all that delete needs.

``list_fleet`` is one ``aggregated/instances`` listing filtered by the fleet label (the tags in
metadata are then checked exactly). A Spot VM that GCE preempted is reported ``preempted`` at
the time GCE gives: its ``lastStopTimestamp`` when it was stopped, or, when the termination
action deleted it, the ``compute.instances.preempted`` operation's time (one
``aggregated/operations`` listing). A listing that cannot be read (``GceApi.pages``), or a VM
carrying our metadata that does not read as ours, is MalformedResponseError: never fewer
instances than there are. ``terminate`` reads each VM first and deletes only those that carry a
spotfleet fleet label; a VM that is gone (404) is success.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from fleet.errors import InstanceNotFoundError, ProviderError
from fleet.model import TAG_FLEET, TAG_POOL, Instance, InstanceState, Market, PoolKey
from providers.kit.responses import malformed

log = logging.getLogger(__name__)

LABEL_FLEET = "spotfleet-fleet"
LABEL_POOL = "spotfleet-pool"
LABEL_PLAN = "spotfleet-plan"
LABEL_TOKEN = "spotfleet-token"
META_TAGS = "spotfleet-tags"
META_OFFER = "spotfleet-offer"
META_LAUNCH = "spotfleet-launch"
PREEMPTED_OPERATION = "compute.instances.preempted"
#: Concurrent gets and deletes in ``terminate``.
WORKERS = 8

_STATES = {
    "PROVISIONING": InstanceState.PENDING,
    "STAGING": InstanceState.PENDING,
    "RUNNING": InstanceState.RUNNING,
    "REPAIRING": InstanceState.RUNNING,
    "STOPPING": InstanceState.STOPPED,
    "SUSPENDING": InstanceState.STOPPED,
    "SUSPENDED": InstanceState.STOPPED,
    "TERMINATED": InstanceState.TERMINATED,
}


def label_value(text: str) -> str:
    """``text`` as a GCE label value: lowercase letters, digits, ``-`` and ``_``, at most 63."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]


def parse_time(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _metadata(inst: Any) -> dict[str, str]:
    return {item.key: item.value for item in inst.metadata.items}


def _private_ip(inst: Any) -> str:
    """The first network interface's internal IP (``networkIP``), "" while none is assigned."""
    nics = list(getattr(inst, "network_interfaces", None) or [])
    return str(getattr(nics[0], "network_i_p", "") or "") if nics else ""


def to_instance(inst: Any, zone: str) -> Instance:
    """A spotfleet Instance from a GCE instance this adapter created (tags read from metadata)."""
    meta = _metadata(inst)
    tags = json.loads(meta.get(META_TAGS, "{}"))
    offer = json.loads(meta.get(META_OFFER, "{}"))
    pool = PoolKey.from_id(tags[TAG_POOL])
    state = _STATES.get(inst.status, InstanceState.PENDING)
    ended = None
    if inst.status == "TERMINATED":
        ended = parse_time(inst.last_stop_timestamp) if inst.last_stop_timestamp else None
        if pool.market is Market.SPOT and ended is not None:
            state = InstanceState.PREEMPTED
    return Instance(
        id=f"{zone}/{inst.name}",
        fleet=tags[TAG_FLEET],
        pool=pool,
        state=state,
        accelerator=str(offer.get("accelerator", "")),
        gpus=int(offer.get("gpus", 1)),
        price_per_hour=float(offer.get("price", 0.0)),
        launched_at=parse_time(inst.creation_timestamp),
        ended_at=ended,
        tags=tags,
        address=_private_ip(inst),
    )


def list_fleet(api: Any, fleet: str) -> list[Instance]:
    """The fleet's VMs (alive, and preempted ones with GCE's time), found by label."""
    pages = api.pages(
        api.instances.aggregated_list,
        kind="compute#instanceAggregatedList",
        what="list instances",
        request={"project": api.project, "filter": f'labels.{LABEL_FLEET} = "{label_value(fleet)}"'},
    )
    out: list[Instance] = []
    for scope, scoped in (item for page in pages for item in page.items.items()):
        zone = scope.split("/", 1)[1]
        for inst in scoped.instances:
            if META_TAGS not in _metadata(inst):
                continue
            try:
                found = to_instance(inst, zone)
            except (KeyError, TypeError, ValueError) as err:
                raise malformed(
                    "gcp",
                    "list instances",
                    detail=f"VM {inst.name} in {zone}: {type(err).__name__} {err}",
                    region=zone.rsplit("-", 1)[0],
                ) from None
            if found.fleet == fleet and (found.state.alive or found.state is InstanceState.PREEMPTED):
                out.append(found)
    return out + _deleted_by_preemption(api, fleet, {i.id for i in out})


def _deleted_by_preemption(api: Any, fleet: str, seen: set[str]) -> list[Instance]:
    """Spot VMs of ``fleet`` that GCE preempted and deleted, with the preemption's time.

    The VM is gone, so only its id, fleet (from the name prefix) and time are known; the pool
    is a placeholder in its zone (the state store knows the real one by id).
    """
    from providers.gcp.launch import fleet_name_prefix

    prefix = fleet_name_prefix(fleet)
    pages = api.pages(
        api.global_operations.aggregated_list,
        kind="compute#operationAggregatedList",
        what="list preemptions",
        request={"project": api.project, "filter": f'operationType = "{PREEMPTED_OPERATION}"'},
    )
    out = []
    for scope, scoped in (item for page in pages for item in page.items.items()):
        zone = scope.split("/", 1)[1] if scope.startswith("zones/") else ""
        for op in scoped.operations:
            name = op.target_link.rsplit("/", 1)[-1]
            ident = f"{zone}/{name}"
            if not zone or not name.startswith(prefix) or ident in seen:
                continue
            seen.add(ident)
            when = parse_time(op.end_time or op.insert_time)
            pool = PoolKey(
                provider="gcp", region=zone.rsplit("-", 1)[0], zone=zone, instance_type="unknown", market=Market.SPOT
            )
            out.append(
                Instance(
                    id=ident,
                    fleet=fleet,
                    pool=pool,
                    state=InstanceState.PREEMPTED,
                    accelerator="",
                    gpus=1,
                    price_per_hour=0.0,
                    launched_at=when,
                    ended_at=when,
                    tags={TAG_FLEET: fleet},
                )
            )
    return out


def split_id(ident: str) -> tuple[str, str] | None:
    zone, _, name = ident.partition("/")
    return (zone, name) if zone and name and "/" not in name else None


def terminate(api: Any, ids: Sequence[str]) -> None:
    """Delete these VMs and wait; gone already is success; VMs without a fleet label are left alone."""
    from providers.gcp.launch import request_id

    def one(ident: str) -> None:
        parts = split_id(ident)
        if parts is None:
            log.warning("gcp: not terminating %r: not a <zone>/<name> instance id", ident)
            return
        zone, name = parts
        region = zone.rsplit("-", 1)[0]
        try:
            inst = api.call(api.instances.get, read=True, region=region, project=api.project, zone=zone, instance=name)
            if not inst.labels.get(LABEL_FLEET):
                log.warning("gcp: not terminating %s: it carries no %s label", ident, LABEL_FLEET)
                return
            op = api.call(
                api.instances.delete_unary,
                region=region,
                request={
                    "project": api.project,
                    "zone": zone,
                    "instance": name,
                    "request_id": request_id(f"delete/{inst.id}", ident),
                },
            )
        except InstanceNotFoundError:
            return
        op = api.wait(zone, op)
        if op.error and op.error.errors and not all(e.code == "RESOURCE_NOT_FOUND" for e in op.error.errors):
            from providers.gcp.errors import from_operation

            raise from_operation([(e.code, e.message) for e in op.error.errors], region=region)

    unique = list(dict.fromkeys(ids))
    if not unique:
        return
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(unique))) as pool:
        failures = [f.exception() for f in [pool.submit(one, i) for i in unique]]
    errors = [e for e in failures if e is not None]
    for err in errors:
        if not isinstance(err, ProviderError):
            raise err
    if errors:
        raise errors[0]


def console_output(api: Any, instance: Instance) -> str:
    """Serial port 1 of one of the fleet's VMs (``instances.getSerialPortOutput``; GCE keeps its
    last 1 MiB). Raises ProviderError for an id that is not ``<zone>/<name>``."""
    parts = split_id(instance.id)
    if parts is None:
        raise ProviderError("gcp", f"{instance.id!r} is not a <zone>/<name> instance id", code="invalid")
    zone, name = parts
    got = api.call(
        api.instances.get_serial_port_output,
        read=True,
        region=zone.rsplit("-", 1)[0],
        request={"project": api.project, "zone": zone, "instance": name, "port": 1},
    )
    return str(got.contents or "")
