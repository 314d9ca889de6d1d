"""``fleet simulate`` on the shipped GCP H100 traces and on generated ones: ours against every baseline.

The spec: 8 weighted GPUs of 1-GPU H100 nodes (a3-highgpu-1g) on GCP, on-demand fallback up
to the whole target (``critical_gpus: 8``), catalog prices from the offline snapshot, a pass
every 10 minutes and a 10-minute cold start. Figures are ratios within one run: share of time
at target and cost as a multiple of the offline optimum (HiGHS) of the same trace.

* **Generated traces** (``fleet.simulate.synth``, fitted to the shipped trace, 7 days each):
  ours' knobs (``GRID``: back-off, fast returns to spot, spot moves) are chosen on seeds
  ``TUNE`` (highest median share at target within 1.10x of the optimum, then the cheapest)
  and every policy is reported on the held-out seeds ``HELD_OUT`` (20 traces): worst and
  median of both figures, on how many traces ours met the goal (>= 99.9% at target, <=
  1.10x), and on how many a baseline was both more available and cheaper than ours.
* **Shipped trace** (13 zones, 12 with a catalog pool, 14 days), never tuned on: every
  policy, and ours as ``fleet rebalance`` runs a spec with the default diversification
  (``ours``), with the bridge (``rebalance.bridge``) and no pool share cap (``ours +
  bridge``), with the tuned knobs (``ours tuned``), with spot moves as well, and with hedging
  (``ours + bridge + hedge``).

Run: ``python benchmarks/simulate.py`` (a few minutes on two cores). Prints the frontier and
saves ``benchmarks/results/simulate.json``.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from fleet.catalog import filter_for_spec, snapshot_offers
from fleet.simulate import engine, optimum, policies, synth
from fleet.simulate.market import build_replay
from fleet.simulate.tracefile import load_traces, shipped_trace_dir
from fleet.spec import parse_spec

RESULTS = Path(__file__).parent / "results" / "simulate.json"
DAYS = 14
GEN_DAYS = 7
TUNE = range(1, 5)
HELD_OUT = range(100, 120)
#: ours' knobs tuned on the TUNE seeds: back-off, fast returns to spot, spot moves (min_saving 0.1)
GRID = tuple((backoff, fast, moves) for backoff in (600, 3600) for fast in (False, True) for moves in (False, True))
GOAL_AVAILABILITY, GOAL_COST = 0.999, 1.10


def spec(share: float = 0.5, rebalance: str = ""):
    return parse_spec(f"""
name: sim
capacity: {{gpus: 8, accelerators: [H100], gpus_per_node: {{min: 1, max: 1}}}}
providers: {{gcp: {{}}}}
diversification: {{min_pools: {1 if share >= 1 else 2}, max_pool_share: {share}, max_zone_share: {share}}}
rebalance: {{critical_gpus: 8{rebalance}}}
""")


def ours_bridge(backoff: int = 600, fast: bool = False, moves: bool = False):
    """Ours with the bridge, no pool share cap; ``fast``: returns to spot at once, all nodes in one
    pass; ``moves``: spot moves to a cheaper pool (``min_saving`` 0.1)."""
    knobs = f", bridge: true, backoff_seconds: {backoff}"
    knobs += ", min_fallback_age_seconds: 0, max_moves_per_pass: 8" if fast else ""
    knobs += ", spot_moves: true, min_saving: 0.1" if moves else ""
    return spec(1.0, knobs)


NAMES: dict[str, str] = {}       # figure key -> policy name, for the table


def _key(name: str) -> str:
    key = name.replace(" + ", "_").replace(" ", "_").replace("-", "_")
    NAMES[key] = name
    return key


def _replay(traces, days):
    return build_replay(filter_for_spec(snapshot_offers(), spec()), traces, int(days * 86400 // traces[0].gap_seconds))


def _run(policy, replay) -> engine.Outcome:
    return engine.run(policy, spec(), replay, interval_ticks=1, cold_ticks=1, target=8.0)


def frontier(traces, days: float, ours: dict[str, object], baselines: bool = True) -> tuple[dict[str, tuple[float, float]], float]:
    """Policy name -> (share at target, x optimum) on one trace set, and the optimum's solve time."""
    replay = _replay(traces, days)
    started = time.perf_counter()
    best = optimum.solve(spec(), replay, cold_ticks=1).cost
    solve_s = time.perf_counter() - started
    assert best
    out = {}
    for name, s in ours.items():
        o = _run(policies.Rebalancer(s, replay.offers, name=name), replay)
        out[name] = (o.at_target, o.cost / best)
    for cls in policies.BASELINES if baselines else ():
        o = _run(cls(spec(), replay.offers), replay)
        out[o.policy] = (o.at_target, o.cost / best)
    return out, solve_s


def dominated(figures: dict[str, tuple[float, float]], name: str) -> list[str]:
    a, c = figures[name]
    return [p for p, (pa, pc) in figures.items() if not p.startswith("ours") and pa > a + 1e-9 and pc < c - 1e-9]


def main() -> dict[str, float]:
    out: dict[str, float] = {}
    shipped = load_traces(shipped_trace_dir())
    started = time.perf_counter()
    model = synth.fit(shipped)
    gen = {seed: synth.generate(model, GEN_DAYS * 144, seed) for seed in [*TUNE, *HELD_OUT]}
    started = time.perf_counter()
    tuned = {}
    for knobs in GRID:
        runs = [frontier(gen[s], GEN_DAYS, {"ours": ours_bridge(*knobs)}, baselines=False)[0]["ours"] for s in TUNE]
        tuned[knobs] = (statistics.median(a for a, _ in runs), statistics.median(c for _, c in runs))
    within = [k for k in GRID if tuned[k][1] <= GOAL_COST]
    # highest median share at target within the cost goal, then the cheapest, then grid order
    chosen = (max(within, key=lambda k: (tuned[k][0], -tuned[k][1])) if within
              else min(GRID, key=lambda k: tuned[k][1]))
    out["tune_wall_s"] = time.perf_counter() - started
    out["tuned_backoff_seconds"], out["tuned_fast_return"], out["tuned_spot_moves"] = chosen

    started = time.perf_counter()
    ours_default = {"ours": spec(), "ours + bridge": ours_bridge(), "ours tuned": ours_bridge(*chosen),
                    "ours tuned + spot moves": ours_bridge(chosen[0], chosen[1], True),
                    "ours + bridge + hedge": spec(1.0, ", bridge: true, hedge: true, cold_start_seconds: 7200")}
    figs, solve_s = frontier(shipped, DAYS, ours_default)
    out["shipped_wall_s"] = time.perf_counter() - started
    out["shipped_optimum_solve_s"] = solve_s
    for name, (a, c) in figs.items():
        out[f"shipped_{_key(name)}_at_target"] = a
        out[f"shipped_{_key(name)}_x_optimum"] = c
    out["shipped_ours_tuned_dominated_by"] = len(dominated(figs, "ours tuned"))
    started = time.perf_counter()
    held: dict[str, list[tuple[float, float]]] = {}
    met = beaten = 0
    for s in HELD_OUT:
        f, _ = frontier(gen[s], GEN_DAYS, {"ours tuned": ours_bridge(*chosen)})
        for name, fig in f.items():
            held.setdefault(name, []).append(fig)
        a, c = f["ours tuned"]
        met += a >= GOAL_AVAILABILITY and c <= GOAL_COST
        beaten += bool(dominated(f, "ours tuned"))
    out["held_out_wall_s"] = time.perf_counter() - started
    out["held_out_traces"] = len(HELD_OUT)
    out["held_out_goal_met"] = met
    out["held_out_ours_dominated"] = beaten
    for name, figs_ in held.items():
        k = _key(name)
        out[f"held_out_{k}_at_target_worst"] = min(a for a, _ in figs_)
        out[f"held_out_{k}_at_target_median"] = statistics.median(a for a, _ in figs_)
        out[f"held_out_{k}_x_optimum_worst"] = max(c for _, c in figs_)
        out[f"held_out_{k}_x_optimum_median"] = statistics.median(c for _, c in figs_)
    return out


def table(out: dict[str, float]) -> str:
    """The frontier as a Markdown table (the README's)."""
    names = [k.removeprefix("shipped_").removesuffix("_at_target") for k in out
             if k.startswith("shipped_") and k.endswith("_at_target")]
    lines = ["| policy | shipped: at target | shipped: x optimum | held-out: at target (median / worst) "
             "| held-out: x optimum (median / worst) |", "|---|---|---|---|---|"]
    for n in names:
        h = f"held_out_{n}"
        held_a = (f"{out[h + '_at_target_median']:.2%} / {out[h + '_at_target_worst']:.2%}"
                  if h + "_at_target_median" in out else "-")
        held_c = (f"{out[h + '_x_optimum_median']:.3f} / {out[h + '_x_optimum_worst']:.3f}"
                  if h + "_x_optimum_median" in out else "-")
        lines.append(f"| {NAMES.get(n, n)} | {out[f'shipped_{n}_at_target']:.2%} | {out[f'shipped_{n}_x_optimum']:.3f} "
                     f"| {held_a} | {held_c} |")
    return "\n".join(lines)


if __name__ == "__main__":
    from figures import print_and_save

    figures = main()
    print_and_save(figures, RESULTS)
    print(table(figures))
