"""A running instance record of fleet ``demo`` in one AWS spot pool, for the state-store tests."""

from __future__ import annotations

from fleet.model import Instance, InstanceState, Market, PoolKey

POOL = PoolKey(provider="aws", region="us-east-1", zone="use1-az1", instance_type="p5.48xlarge", market=Market.SPOT)


def running_instance(iid: str, launched: float = 1000.0, plan: str = "") -> Instance:
    tags = {"spotfleet:fleet": "demo", "spotfleet:pool": POOL.id}
    if plan:
        tags["spotfleet:plan"] = plan
    return Instance(
        id=iid,
        fleet="demo",
        pool=POOL,
        state=InstanceState.RUNNING,
        accelerator="H100",
        gpus=8,
        price_per_hour=30.0,
        launched_at=launched,
        tags=tags,
    )
