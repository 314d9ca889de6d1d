"""Spec texts of the Pulumi stack tests, and ``fleet_plan``, which plans one with the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: Zone ID -> subnet for every AWS zone the snapshot can pick in the test regions.
SUBNETS = {f"use1-az{i}": f"subnet-use1{i}" for i in range(1, 7)} | {
    f"usw2-az{i}": f"subnet-usw2{i}" for i in range(1, 5)
}

MULTI = """\
name: multi
backend: cloud
capacity:
  gpus: 64
  accelerators: [H100, A100-80GB]
  on_demand_gpus: 8
providers:
  aws: {regions: [us-east-1, us-west-2], subnets: %s}
  gcp: {project: demo-project, regions: [us-central1], on_demand: false}
  vast: {on_demand: false}
diversification: {max_pool_share: 0.12, min_pools: 9}
checkpoint: {provider: s3, expire_days: 14}
node:
  startup: python train.py --resume
  spotfleet: preinstalled     # stacks refuse ship (the default): their templates outlive a wheel URL
  env: {WANDB_PROJECT: demo, HF_TOKEN: "${env:HF_TOKEN}"}
""" % (SUBNETS,)  # noqa: UP031  (in an f-string every YAML brace would be doubled)

AZURE = """\
name: azfleet
backend: cloud
capacity: {gpus: 32, accelerators: [A100-80GB], on_demand_gpus: 4}
providers:
  azure: {regions: [eastus]}
diversification: {max_pool_share: 0.4, min_pools: 3}
checkpoint: {provider: azure, expire_days: 7}
node: {startup: python train.py, spotfleet: preinstalled}
"""


def fleet_plan(tmp: Path, text: str, name: str = "spec.yaml") -> tuple[Path, Path]:
    """Write ``text`` as a spec and plan it with the CLI (``fleet plan --out``): (spec, plan) paths."""
    spec, plan = tmp / name, tmp / "plan.json"
    spec.write_text(text)
    fleet = Path(sys.executable).with_name("fleet")
    done = subprocess.run(
        [str(fleet), "--home", str(tmp / "home"), "plan", str(spec), "--out", str(plan), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return spec, plan
