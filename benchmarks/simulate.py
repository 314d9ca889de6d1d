"""``fleet simulate`` on the shipped GCP H100 traces: our rebalancer against the baselines.

The spec: 8 weighted GPUs of 1-GPU H100 nodes (a3-highgpu-1g) on GCP, on-demand fallback up
to the whole target (``critical_gpus: 8``), catalog prices from the offline snapshot; the
13-zone trace (12 zones have a catalog pool), 10-minute ticks, a pass every 10 minutes,
10-minute cold start, 14 simulated days. Reported for ours and every baseline: share of time
at target, cost as a share of all on-demand and as a multiple of the offline optimum,
interruptions; the frontier our spec's knobs give (0, 1, 2 spare spot nodes, times the
largest share of spot in one pool), planned with the catalog's interruption rates and with the
fresh-node hazard fitted from the same traces (``--rates hazard``, in-sample); the wall time of simulating ours over the 14 days and
the optimum's solve time (HiGHS).

Run: ``python benchmarks/simulate.py`` (about three minutes on two cores). Prints the figures
and saves ``benchmarks/results/simulate.json``.
"""

from __future__ import annotations

import time
from pathlib import Path

from fleet.catalog import snapshot_offers
from fleet.simulate import SimOptions, simulate
from fleet.simulate.tracefile import load_traces, shipped_trace_dir
from fleet.spec import parse_spec

RESULTS = Path(__file__).parent / "results" / "simulate.json"
DAYS = 14


def spec(max_pool_share: float = 0.5):
    return parse_spec(f"""
name: sim
capacity: {{gpus: 8, accelerators: [H100], gpus_per_node: {{min: 1, max: 1}}}}
providers: {{gcp: {{}}}}
diversification: {{min_pools: 2, max_pool_share: {max_pool_share}}}
rebalance: {{critical_gpus: 8}}
""")


def main() -> dict[str, float]:
    traces = load_traces(shipped_trace_dir())
    out: dict[str, float] = {"zones": len(traces), "days": DAYS}
    started = time.perf_counter()
    base = simulate(spec(), snapshot_offers(), traces, SimOptions(days=DAYS, optimum=False, baselines=False))
    out["ours_14_days_wall_s"] = time.perf_counter() - started
    started = time.perf_counter()
    full = simulate(spec(), snapshot_offers(), traces, SimOptions(days=DAYS))
    out["all_policies_and_optimum_wall_s"] = time.perf_counter() - started
    out["pools_simulated"] = len(full.replay.capacity)
    assert full.optimum is not None and full.optimum.cost is not None
    best, od = full.optimum.cost, full.on_demand_cost
    assert od
    started = time.perf_counter()
    from fleet.simulate.optimum import solve
    solve(spec(), full.replay, cold_ticks=full.cold_ticks)
    out["optimum_solve_s"] = time.perf_counter() - started
    out["optimum_cost_usd"] = best
    out["optimum_share_of_on_demand"] = best / od
    assert base.outcomes[0].cost == full.outcomes[0].cost
    for o in full.outcomes:
        key = o.policy.replace(" + ", "_").replace(" ", "_").replace("-", "_")
        out[f"{key}_at_target"] = o.at_target
        out[f"{key}_cost_usd"] = o.cost
        out[f"{key}_share_of_on_demand"] = o.cost / od
        out[f"{key}_x_optimum"] = o.cost / best
        out[f"{key}_interruptions"] = o.interruptions
        out[f"{key}_on_demand_node_hours"] = o.on_demand_node_hours
    for rates in ("catalog", "hazard"):
        for share in (0.5, 0.25, 0.125):
            for spare in (0, 1, 2):
                r = simulate(spec(share), snapshot_offers(), traces,
                             SimOptions(days=DAYS, spare=spare, optimum=False, baselines=False, rates=rates))
                o = r.outcomes[0]
                key = f"frontier_{rates}_share_{share:g}_spare_{spare}"
                out[f"{key}_at_target"] = o.at_target
                out[f"{key}_x_optimum"] = o.cost / best
                out[f"{key}_share_of_on_demand"] = o.cost / od
    return out


if __name__ == "__main__":
    from figures import print_and_save

    print_and_save(main(), RESULTS)
