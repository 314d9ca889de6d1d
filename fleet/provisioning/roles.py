"""Bringing up a fleet with a head: the head first, then the workers with its address.

Contract (used by ``fleet up`` when the spec has ``head:``):

* :func:`head_stage` is the plan of the first step: the head allocation plus every worker
  pool capped at what already runs there, so applying it launches the head only and
  terminates nothing the full plan keeps;
* :func:`wait_for_head` polls the providers until ``head.count`` head instances run and
  report an address, or raises :class:`HeadNotReady` after ``head.ready_timeout_seconds``
  (a clear one-line error: which pool, what state it is in);
* :func:`head_node` / :func:`worker_node` are the node configurations of the two roles;
  every worker sees ``SPOTFLEET_ROLE=worker``, ``SPOTFLEET_HEAD_ADDR`` (and
  ``SPOTFLEET_HEAD_PORT`` when the spec sets ``head.port``); the head sees
  ``SPOTFLEET_ROLE=head`` and its port. The node bootstrap exports them like any node env.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from fleet.errors import FleetError
from fleet.model import HEAD, WORKER, Instance, InstanceState, NodeConfig, Plan
from fleet.provisioning.executor import apply
from fleet.provisioning.launching import Progress, ProgressFn
from fleet.provisioning.reconcile import observe
from fleet.spec import FleetSpec
from fleet.state import StateStore
from providers.base import Provider

ROLE_VAR = "SPOTFLEET_ROLE"
ADDR_VAR = "SPOTFLEET_HEAD_ADDR"
PORT_VAR = "SPOTFLEET_HEAD_PORT"
POLL_SECONDS = 1.0


class HeadNotReady(FleetError):
    """The head did not come up in time; nothing was launched for the workers."""


def head_pools(plan: Plan) -> dict[str, int]:
    """Head instances wanted per pool id."""
    out: dict[str, int] = {}
    for a in plan.role_allocations(HEAD):
        out[a.offer.pool.id] = out.get(a.offer.pool.id, 0) + a.count
    return out


def head_stage(plan: Plan, current: Mapping[str, int]) -> Plan:
    """``plan`` with every worker allocation capped at ``current`` (see the module doc)."""
    capped = tuple(
        a if a.role == HEAD else a.model_copy(update={"count": min(a.count, current.get(a.offer.pool.id, 0))})
        for a in plan.allocations
    )
    return plan.model_copy(update={"allocations": tuple(a for a in capped if a.count > 0 or a.role == HEAD)})


def head_instances(plan: Plan, instances: list[Instance]) -> list[Instance]:
    """The alive instances of the plan's head pools (oldest first)."""
    pools = head_pools(plan)
    alive = [i for i in instances if i.pool.id in pools and i.state.alive]
    return sorted(alive, key=lambda i: (i.launched_at, i.id))


def wait_for_head(
    spec: FleetSpec,
    plan: Plan,
    providers: Mapping[str, Provider],
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Instance]:
    """The running head instances, once ``spec.head.count`` of them run with an address."""
    assert spec.head is not None
    deadline = clock() + spec.head.ready_timeout_seconds
    while True:
        heads = head_instances(plan, observe(providers, spec.name).instances)
        ready = [i for i in heads if i.state is InstanceState.RUNNING and i.address]
        if len(ready) >= spec.head.count:
            return ready[: spec.head.count]
        if clock() >= deadline:
            seen = (
                ", ".join(f"{i.id} {i.state.value}{'' if i.address else ' (no address yet)'}" for i in heads)
                or "none alive"
            )
            raise HeadNotReady(
                f"the head of fleet {spec.name!r} is not running after {spec.head.ready_timeout_seconds:g}s "
                f"(pools {', '.join(head_pools(plan))}: {seen}); no workers were launched. Rerun `fleet up` "
                "to keep waiting, or raise head.ready_timeout_seconds"
            )
        sleep(POLL_SECONDS)


def fleet_node(spec: FleetSpec, providers: Mapping[str, Provider], environ: Mapping[str, str]) -> NodeConfig:
    """What the fleet's worker nodes run: ``spec.node`` with its ``${env:NAME}`` references
    resolved from ``environ`` and the checkpoint URI (the store is ensured: ``checkpoint_uri``);
    providers whose nodes have no cloud identity get scoped store credentials (``node_credentials``).
    ``fleet up`` and the rebalancer's replacements use the same, so a replacement resumes as
    the node it replaces would."""
    from fleet.provisioning import node_credentials
    from fleet.provisioning.ship import node_software
    from fleet.provisioning.storage import checkpoint_uri
    from fleet.secrets import resolve_env

    node = NodeConfig(
        **{**spec.node.model_dump(exclude={"forward_credentials"}), "env": resolve_env(spec.node.env, environ)},
        checkpoint_uri=checkpoint_uri(spec, providers),
    )
    node_credentials.grant(spec, providers)  # nodes without a cloud identity: scoped store credentials
    return node_software(spec, providers, node)


def head_node(
    spec: FleetSpec, env: Mapping[str, str], checkpoint_uri: str, software: NodeConfig | None = None
) -> NodeConfig:
    """What head nodes run: ``head.image``/``head.startup`` with ``env`` (resolved ``head.env``),
    getting spotfleet as ``software`` (the workers' node configuration) does."""
    assert spec.head is not None
    extra = {ROLE_VAR: HEAD, **({PORT_VAR: str(spec.head.port)} if spec.head.port else {})}
    got = software or NodeConfig(spotfleet=spec.node.spotfleet)
    return NodeConfig(
        image=spec.head.image or spec.node.image,
        startup=spec.head.startup,
        env={**env, **extra},
        ssh_key=spec.node.ssh_key,
        checkpoint_uri=checkpoint_uri,
        spotfleet=got.spotfleet,
        wheel_url=got.wheel_url,
        wheel_file=got.wheel_file,
        wheel_sha256=got.wheel_sha256,
    )


def worker_node(spec: FleetSpec, node: NodeConfig, head: Instance) -> NodeConfig:
    """The workers' node configuration: ``node`` plus the head's address (and port)."""
    assert spec.head is not None
    extra = {ROLE_VAR: WORKER, ADDR_VAR: head.address, **({PORT_VAR: str(spec.head.port)} if spec.head.port else {})}
    return node.model_copy(update={"env": {**node.env, **extra}})


def start_head(
    spec: FleetSpec,
    plan: Plan,
    providers: Mapping[str, Provider],
    store: StateStore,
    *,
    node: NodeConfig,
    head_env: Mapping[str, str],
    current: Mapping[str, int],
    progress: ProgressFn | None = None,
    max_workers: int = 32,
) -> tuple[NodeConfig, dict[str, NodeConfig]]:
    """Launch the head (``head_stage``), wait until it runs, and return the workers' node
    configuration and ``role_nodes`` for applying the full plan. Raises ``HeadNotReady``."""
    head_cfg = head_node(spec, head_env, node.checkpoint_uri, node)
    role_nodes = {HEAD: head_cfg}
    stage = head_stage(plan, current)
    if progress is not None:
        progress(Progress("note", message=f"starting the head first ({', '.join(head_pools(plan))})"))
    report = apply(
        stage, providers, store, progress=progress, node=node, role_nodes=role_nodes, max_workers=max_workers
    )
    if report.failures and not head_instances(plan, observe(providers, spec.name).instances):
        first = report.failures[0]
        raise HeadNotReady(
            f"the head of fleet {spec.name!r} could not be launched in {first.pool}: "
            f"{first.error_kind}: {first.error_message}; no workers were launched"
        )
    heads = wait_for_head(spec, plan, providers)
    if progress is not None:
        progress(Progress("note", message=f"head {heads[0].id} runs at {heads[0].address}"))
    return worker_node(spec, node, heads[0]), role_nodes
