"""The Pulumi program: read the spec and the saved plan named in stack config, declare SpotFleet.

Stack config (namespace ``spotfleet``): ``spec`` (path of the fleet spec, required) and ``plan``
(path of ``fleet plan --out`` JSON, default ``plan.json``), both relative to the project
directory. ``node.env`` references (``${env:NAME}``) are resolved from the environment of
``pulumi up``, as ``fleet up`` does, and reach the nodes as secret outputs.

Stack outputs: ``counts``, ``price_per_hour``, ``plan_id``, ``groups``, ``bucket_uri``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pulumi

from fleet.errors import FleetError
from fleet.model import Plan
from fleet.secrets import resolve_env
from fleet.spec import load_spec
from stacks.fleet import SpotFleet


def main(root: str | Path = ".") -> SpotFleet:
    """Declare the fleet; ``root`` is where relative config paths start."""
    config = pulumi.Config("spotfleet")
    root = Path(root)
    spec = load_spec(root / config.require("spec"))
    plan_path = root / (config.get("plan") or "plan.json")
    try:
        plan = Plan.from_json(plan_path.read_text())
    except OSError as err:
        raise FleetError(
            f"cannot read the plan {plan_path}: {err.strerror}; run `fleet plan SPEC --out {plan_path.name}`"
        ) from None
    fleet = SpotFleet(spec.name, spec, plan, env=resolve_env(spec.node.env, os.environ))
    pulumi.export("counts", fleet.counts)
    pulumi.export("price_per_hour", fleet.price_per_hour)
    pulumi.export("plan_id", fleet.plan_id)
    pulumi.export("groups", fleet.groups)
    pulumi.export("bucket_uri", fleet.bucket_uri)
    return fleet
