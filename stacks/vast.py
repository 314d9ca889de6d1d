"""Vast.ai part of a SpotFleet: one dynamic resource per planned pool, run by the Vast adapter.

:class:`VastPoolProvider` is a Pulumi dynamic provider whose create / update / delete call
:class:`providers.vast.provider.VastProvider` (no second copy of the REST code), so bids are
placed exactly as ``fleet up`` places them: the same label, token, bid rule, bootstrap and
store credentials. The adapter reads ``SPOTFLEET_VAST_URL`` and ``VAST_API_KEY`` from the
environment of ``pulumi up``; the key never enters the stack's state.

Inputs of a pool resource (all plain JSON): ``fleet``, ``offer`` (the planned
:class:`fleet.model.Offer`), ``count``, ``token`` (stable per pool), ``tags``, ``node``
(image, startup, env, checkpoint_uri), ``settings`` (``providers.vast`` of the spec) and
``max_per_gpu_hour``. Outputs add ``instance_ids``. A change of fleet, pool or node settings
replaces the resource; a change of ``count`` (only when not ignored, see ``stacks.ownership``)
launches or destroys the difference. Delete destroys every instance of the fleet in that pool,
including the rebalancer's replacements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pulumi.dynamic as dynamic

from fleet.model import InstanceState, LaunchRequest, NodeConfig, Offer
from fleet.spec import FleetSpec
from providers.vast.settings import VastSettings
from stacks.layout import PoolPlan
from stacks.ownership import ignore_changes

DYNAMIC_TYPE = "pulumi-python:dynamic:Resource"
#: Inputs whose change means new instances (the rest update in place).
REPLACE_ON = ("fleet", "pool", "node", "settings")


def _default_adapter(settings: dict[str, Any], max_per_gpu_hour: float | None):
    from providers.vast.provider import VastProvider

    return VastProvider(VastSettings.model_validate(settings), max_per_gpu_hour=max_per_gpu_hour)


class VastPoolProvider(dynamic.ResourceProvider):
    """create / diff / update / delete of one pool's Vast instances through the Vast adapter.

    ``adapter`` builds a VastProvider from (settings, max_per_gpu_hour); the default reads the
    endpoint and key from the environment."""

    def __init__(self, adapter: Callable[[dict[str, Any], float | None], Any] | None = None):
        self._adapter = adapter or _default_adapter

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        ids = self._launch(props, props["count"], props["token"])
        if not ids and props["count"] > 0:
            raise RuntimeError(
                f"vast: no instance could be rented in pool {props['pool']}; plan again "
                "(`fleet plan --out`) and run `pulumi up`"
            )
        return dynamic.CreateResult(id_=props["token"], outs={**props, "instance_ids": ids})

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        changed = [
            k
            for k in ("fleet", "pool", "node", "settings", "count", "offer", "tags", "max_per_gpu_hour")
            if olds.get(k) != news.get(k)
        ]
        replaces = [k for k in changed if k in REPLACE_ON]
        return dynamic.DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=True)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.UpdateResult:
        adapter = self._adapter(news["settings"], news.get("max_per_gpu_hour"))
        alive = [i.id for i in self._instances(adapter, news)]
        want = news["count"]
        if len(alive) < want:
            alive += self._launch(news, want - len(alive), f"{news['token']}-n{want}", adapter)
        elif len(alive) > want:
            adapter.terminate(alive[want:])
            alive = alive[:want]
        return dynamic.UpdateResult(outs={**news, "instance_ids": alive})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        adapter = self._adapter(props["settings"], props.get("max_per_gpu_hour"))
        ids = {*props.get("instance_ids", []), *(i.id for i in self._instances(adapter, props))}
        adapter.terminate(sorted(ids))

    # ---- internals -------------------------------------------------------------------------
    def _launch(self, props: dict[str, Any], count: int, token: str, adapter=None) -> list[str]:
        adapter = adapter or self._adapter(props["settings"], props.get("max_per_gpu_hour"))
        node = props["node"]
        request = LaunchRequest(
            fleet=props["fleet"],
            offer=Offer.model_validate(props["offer"]),
            count=count,
            token=token,
            tags=dict(props["tags"]),
            node=NodeConfig(
                image=node.get("image", ""),
                startup=node.get("startup", ""),
                env=dict(node.get("env") or {}),
                checkpoint_uri=node.get("checkpoint_uri", ""),
                spotfleet=node.get("spotfleet", "preinstalled"),
            ),
        )
        return [i.id for i in adapter.launch(request).instances]

    @staticmethod
    def _instances(adapter, props: dict[str, Any]) -> list:
        return [
            i
            for i in adapter.list_instances(props["fleet"])
            if i.pool.id == props["pool"] and i.state is not InstanceState.TERMINATED
        ]


class VastPool(dynamic.Resource):
    """One planned Vast pool; ``instance_ids`` lists the instances it rented."""

    instance_ids: pulumi.Output[list]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        super().__init__(VastPoolProvider(), name, {**props, "instance_ids": None}, opts)


def pool_inputs(spec: FleetSpec, p: PoolPlan) -> dict[str, Any]:
    """The inputs of ``p``'s VastPool (plain JSON; ``node.env`` may hold resolved secrets)."""
    settings = spec.provider_settings("vast")
    return {
        "fleet": spec.name,
        "pool": p.pool.id,
        "offer": p.offer.model_dump(mode="json"),
        "count": p.count,
        "token": f"pulumi-{spec.name}-{p.pool.short_hash}",
        "tags": dict(p.tags),
        "node": {
            "image": spec.node.image,
            "startup": spec.node.startup,
            "env": dict(p.boot.env),
            "checkpoint_uri": p.boot.checkpoint_uri,
            "spotfleet": p.boot.spotfleet,
        },
        "settings": (settings or VastSettings()).model_dump(mode="json"),
        "max_per_gpu_hour": spec.budget.max_per_gpu_hour,
    }


class VastFleet(pulumi.ComponentResource):
    """The Vast pools of a plan. Output: ``pools`` (pool name -> instance ids)."""

    def __init__(self, name: str, spec: FleetSpec, pools: list[PoolPlan], opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotfleet:index:VastFleet", name, None, opts)
        self.instance_ids: dict[str, pulumi.Output] = {}
        for p in pools:
            props = pool_inputs(spec, p)
            if p.secret:  # node.env holds resolved ${env:...} values: keep them encrypted in the state
                props["node"] = pulumi.Output.secret(props["node"])
            resource = VastPool(
                p.name,
                props,
                pulumi.ResourceOptions(parent=self, ignore_changes=ignore_changes(DYNAMIC_TYPE, spot=p.spot)),
            )
            self.instance_ids[p.name] = resource.instance_ids
        self.register_outputs({"instance_ids": self.instance_ids})
