#!/usr/bin/env python3
"""What a SpotFleet stack declares and how long declaring it takes, under Pulumi's mocks.

For multi-cloud specs of growing size (AWS + GCP from the shipped snapshot, and Azure when
pulumi-azure-native is installed), the plan is made first (as ``fleet plan --out`` does) and
then declared by ``stacks.fleet.SpotFleet`` with the engine replaced by the unit-test mocks
(tests/stacks/harness.py). Reports pools, resources declared, plan seconds, declare seconds,
and the import time of each provider SDK's top-level package. The SDKs load their resource
modules lazily, so the first size's declare time includes loading them (what every ``pulumi
preview`` pays once); later sizes show the declaring itself.

    python benchmarks/pulumi_stack.py [--sizes 64,256,1024]

Prints a table and writes benchmarks/results/pulumi_stack.json.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "stacks"))

from fleet.catalog import Catalog, filter_for_spec  # noqa: E402
from fleet.planning.planner import plan as make_plan  # noqa: E402
from fleet.spec import parse_spec  # noqa: E402
from providers.base import OfferQuery  # noqa: E402

SPEC = """\
name: bench
backend: cloud
capacity: {{gpus: {gpus}, accelerators: [H100, A100-80GB], on_demand_gpus: {baseline}}}
providers:
  aws: {{regions: [us-east-1, us-west-2], subnets: {subnets}}}
  gcp: {{project: bench, regions: [us-central1, europe-west4]}}
{azure}diversification: {{max_pool_share: 0.1, min_pools: 10}}
checkpoint: {{provider: s3, expire_days: 14}}
node: {{startup: python train.py}}
"""
SUBNETS = {f"use1-az{i}": f"subnet-use1{i}" for i in range(1, 7)} | {
    f"usw2-az{i}": f"subnet-usw2{i}" for i in range(1, 5)
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,256,1024")
    args = parser.parse_args()
    sdks = ["pulumi", "pulumi_aws", "pulumi_gcp"]
    with_azure = importlib.util.find_spec("pulumi_azure_native") is not None
    if with_azure:
        sdks.append("pulumi_azure_native")
    imports = {}
    for name in sdks:
        start = time.perf_counter()
        importlib.import_module(name)
        imports[name] = round(time.perf_counter() - start, 3)
    from harness import declare

    from stacks.fleet import SpotFleet

    rows = []
    for gpus in (int(s) for s in args.sizes.split(",")):
        spec = parse_spec(
            SPEC.format(
                gpus=gpus,
                baseline=gpus // 8,
                subnets=SUBNETS,
                azure="  azure: {regions: [eastus]}\n" if with_azure else "",
            )
        )
        start = time.perf_counter()
        offers, _ = Catalog().offers(OfferQuery(accelerators=tuple(spec.capacity.accelerators)))
        plan = make_plan(spec, filter_for_spec(offers, spec))
        planned = time.perf_counter() - start
        start = time.perf_counter()
        declared, _ = declare(lambda: SpotFleet("bench", spec, plan, env={}))
        declaring = time.perf_counter() - start
        rows.append(
            {
                "target_gpus": gpus,
                "pools": len(plan.counts()),
                "instances": sum(plan.counts().values()),
                "resources": len(declared),
                "plan_seconds": round(planned, 3),
                "declare_seconds": round(declaring, 3),
            }
        )
    print("SDK import seconds: " + ", ".join(f"{k} {v}" for k, v in imports.items()))
    print(f"{'GPUs':>6} {'pools':>6} {'nodes':>6} {'resources':>10} {'plan s':>8} {'declare s':>10}")
    for r in rows:
        print(
            f"{r['target_gpus']:>6} {r['pools']:>6} {r['instances']:>6} {r['resources']:>10} "
            f"{r['plan_seconds']:>8} {r['declare_seconds']:>10}"
        )
    out = ROOT / "benchmarks" / "results" / "pulumi_stack.json"
    out.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "python": platform.python_version(),
                "azure": with_azure,
                "sdk_import_seconds": imports,
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"saved {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
