"""``fleet simulate`` on the shipped GCP H100 traces and on generated ones: ours against every baseline.

The spec: 8 weighted GPUs of 1-GPU H100 nodes (a3-highgpu-1g) on GCP, on-demand fallback up
to the whole target (``critical_gpus: 8``), catalog prices from the offline snapshot, a pass
every 10 minutes and a 10-minute cold start. Figures are ratios within one run: share of time
at target and cost as a multiple of the offline optimum (HiGHS) of the same trace.

* **Generated traces** (``fleet.simulate.synth``, fitted to the shipped trace, 7 days each):
  ours' knobs (``GRID``: back-off, spot moves, and ``rebalance.charge_cold_start``, which charges
  a lost node its restart plus the cold start when the rebalancer prices a pool by its learned
  rate, so the fleet leaves zones that drop often) are chosen on seeds
  ``TUNE`` (highest median share at target within 1.10x of the optimum, then the cheapest)
  and every policy is reported on the held-out seeds ``HELD_OUT`` (20 traces): worst and
  median of both figures, on how many traces ours met the goal (>= 99.9% at target, <=
  1.10x), and on how many a baseline was both more available and cheaper than ours; ours
  with the defaults, and with the defaults and ``charge_cold_start``, on every held-out trace too.
* **Shipped trace** (13 zones, 12 with a catalog pool, 14 days), never tuned on: every
  policy, and ours as ``fleet rebalance`` runs a spec with the default diversification
  (``ours``), with the bridge (``rebalance.bridge``) and no pool share cap (``ours +
  bridge``), with the charge (``ours + charge``), with the tuned knobs (``ours tuned``), with spot
  moves as well, and with hedging (``ours + bridge + hedge``, correlated groups included); and
  ours' frontier: every ``GRID`` setting on it.
* **The past-only bound** (``simulate_bound``): on the shipped and on every held-out trace, the
  most a policy that knows only the past (and each zone's hazard exactly, moving for free) can
  expect to be at target within 1.10x the optimum, and what 99.9% costs it.
* Times: CPU seconds of the simulations and of the optimum's solves, and the load average.

Run: ``python benchmarks/simulate.py`` (a few minutes on two cores). Prints the frontier and
saves ``benchmarks/results/simulate.json``.
"""

from __future__ import annotations

import os
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
#: ours' knobs tuned on the TUNE seeds: back-off, fast returns to spot (always: the last tune chose them),
#: spot moves (min_saving 0.1), charge_cold_start (a loss costs the 300 s restart plus the 10-minute
#: cold start in the rebalancer's pricing; the last grid's restart 900 s did the same planner-wide)
GRID = tuple(
    (backoff, True, moves, charge) for backoff in (600, 3600) for moves in (False, True) for charge in (False, True)
)
GOAL_AVAILABILITY, GOAL_COST = 0.999, 1.10


def spec(share: float = 0.5, rebalance: str = ""):
    return parse_spec(f"""
name: sim
capacity: {{gpus: 8, accelerators: [H100], gpus_per_node: {{min: 1, max: 1}}}}
providers: {{gcp: {{}}}}
diversification: {{min_pools: {1 if share >= 1 else 2}, max_pool_share: {share}, max_zone_share: {share}}}
rebalance: {{critical_gpus: 8{rebalance}}}
""")


def ours_bridge(backoff: int = 600, fast: bool = False, moves: bool = False, charge: bool = False):
    """Ours with the bridge, no pool share cap; ``fast``: returns to spot at once, all nodes in one
    pass; ``moves``: spot moves to a cheaper pool (``min_saving`` 0.1); ``charge``:
    ``charge_cold_start`` (the rebalancer prices a loss at the restart plus the cold start)."""
    knobs = f", bridge: true, backoff_seconds: {backoff}"
    knobs += ", min_fallback_age_seconds: 0, max_moves_per_pass: 8" if fast else ""
    knobs += ", spot_moves: true, min_saving: 0.1" if moves else ""
    knobs += ", charge_cold_start: true" if charge else ""
    return spec(1.0, knobs)


def knob_name(knobs) -> str:
    backoff, _fast, moves, charge = knobs
    return f"ours b{backoff}{' charge' if charge else ''}{' moves' if moves else ''}"


NAMES: dict[str, str] = {}  # figure key -> policy name, for the table


def _key(name: str) -> str:
    key = name.replace(" + ", "_").replace(" ", "_").replace("-", "_")
    NAMES[key] = name
    return key


def _replay(traces, days):
    return build_replay(filter_for_spec(snapshot_offers(), spec()), traces, int(days * 86400 // traces[0].gap_seconds))


TIMES = {"simulate_cpu_s": 0.0, "simulations": 0, "optimum_cpu_s": 0.0, "optimum_solves": 0}
_BEST: dict[tuple[int, float], tuple[object, float, float]] = {}  # (traces, days) -> (replay, optimum, solve s)


def _run(policy, replay) -> engine.Outcome:
    started = time.process_time()
    out = engine.run(policy, spec(), replay, interval_ticks=1, cold_ticks=1, target=8.0)
    TIMES["simulate_cpu_s"] += time.process_time() - started
    TIMES["simulations"] += 1
    return out


def _optimum(traces, days: float):
    """The replay of ``traces`` and its offline optimum, solved once per trace set."""
    key = (id(traces), days)
    if key not in _BEST:
        replay = _replay(traces, days)
        started = time.process_time()
        best = optimum.solve(spec(), replay, cold_ticks=1).cost
        took = time.process_time() - started
        TIMES["optimum_cpu_s"] += took
        TIMES["optimum_solves"] += 1
        assert best
        _BEST[key] = (replay, best, took)
    return _BEST[key]


def frontier(
    traces, days: float, ours: dict[str, object], baselines: bool = True
) -> tuple[dict[str, tuple[float, float]], float]:
    """Policy name -> (share at target, x optimum) on one trace set, and the optimum's solve CPU seconds."""
    replay, best, solve_s = _optimum(traces, days)
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
    out: dict[str, float] = {"load_avg_1m_start": os.getloadavg()[0]}
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
    chosen = max(within, key=lambda k: (tuned[k][0], -tuned[k][1])) if within else min(GRID, key=lambda k: tuned[k][1])
    out["tune_wall_s"] = time.perf_counter() - started
    out["tuned_backoff_seconds"], out["tuned_fast_return"], out["tuned_spot_moves"], out["tuned_charge_cold_start"] = (
        chosen
    )

    started = time.perf_counter()
    ours_default = {
        "ours": spec(),
        "ours + charge": spec(rebalance=", charge_cold_start: true"),
        "ours + bridge": ours_bridge(),
        "ours tuned": ours_bridge(*chosen),
        "ours tuned + spot moves": ours_bridge(chosen[0], chosen[1], True, chosen[3]),
        "ours + bridge + hedge": spec(1.0, ", bridge: true, hedge: true, cold_start_seconds: 7200"),
    }
    figs, solve_s = frontier(shipped, DAYS, ours_default)
    out["shipped_wall_s"] = time.perf_counter() - started
    out["shipped_optimum_solve_s"] = solve_s
    for name, (a, c) in figs.items():
        out[f"shipped_{_key(name)}_at_target"] = a
        out[f"shipped_{_key(name)}_x_optimum"] = c
    for name in ("ours tuned", "ours", "ours + charge"):
        out[f"shipped_{_key(name)}_dominated_by"] = len(dominated(figs, name))
    started = time.perf_counter()
    grid, _ = frontier(shipped, DAYS, {knob_name(k): ours_bridge(*k) for k in GRID}, baselines=False)
    for name, (a, c) in grid.items():  # ours' frontier on the shipped trace: every setting of the grid
        out[f"frontier_{_key(name)}_at_target"] = a
        out[f"frontier_{_key(name)}_x_optimum"] = c
    out["shipped_frontier_wall_s"] = time.perf_counter() - started
    started = time.perf_counter()
    held: dict[str, list[tuple[float, float]]] = {}
    met = beaten = 0
    for s in HELD_OUT:
        f, _ = frontier(
            gen[s],
            GEN_DAYS,
            {
                "ours tuned": ours_bridge(*chosen),
                "ours": spec(),
                "ours + charge": spec(rebalance=", charge_cold_start: true"),
            },
        )
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
    med = {
        name: (statistics.median(a for a, _ in f_), statistics.median(c for _, c in f_)) for name, f_ in held.items()
    }
    for name in ("ours tuned", "ours", "ours + charge"):
        out[f"held_out_median_{_key(name)}_dominated_by"] = len(dominated(med, name))
    out.update(bounds(shipped, gen))
    out.update({k: float(v) for k, v in TIMES.items()})
    out["load_avg_1m_end"] = os.getloadavg()[0]
    return out


def bounds(shipped, gen) -> dict[str, float]:
    """The past-only bound (``simulate_bound``) on the shipped trace and the held-out ones: the
    best expected share at target within ``GOAL_COST``, and the cost multiple 99.9% takes."""
    from simulate_bound import at_cost, cost_for
    from simulate_bound import frontier as bound_frontier

    out: dict[str, float] = {}
    started = time.process_time()
    held: list[tuple[float, float]] = []
    for name, traces, days in [("shipped", shipped, DAYS), *(("held", gen[s], GEN_DAYS) for s in HELD_OUT)]:
        replay, best, _ = _optimum(traces, days)
        points = bound_frontier(replay, 8, best)
        measured = replay.ticks - 1
        below = at_cost(points, GOAL_COST)
        share = 1 - below / measured if below is not None else 0.0
        cost = cost_for(points, (1 - GOAL_AVAILABILITY) * measured)
        if name == "shipped":
            out["bound_shipped_at_target_within_goal_cost"] = share
            out["bound_shipped_ticks_below_within_goal_cost"] = below if below is not None else float(measured)
            out["bound_shipped_x_optimum_for_goal_availability"] = cost if cost is not None else float("inf")
        else:
            held.append((share, cost if cost is not None else float("inf")))
    out["bound_held_out_at_target_within_goal_cost_median"] = statistics.median(a for a, _ in held)
    out["bound_held_out_at_target_within_goal_cost_best"] = max(a for a, _ in held)
    out["bound_held_out_x_optimum_for_goal_availability_median"] = statistics.median(c for _, c in held)
    out["bound_held_out_x_optimum_for_goal_availability_least"] = min(c for _, c in held)
    out["bound_held_out_goal_possible"] = sum(1 for a, _ in held if a >= GOAL_AVAILABILITY)
    out["bound_cpu_s"] = time.process_time() - started
    return out


def table(out: dict[str, float]) -> str:
    """The frontier as a Markdown table (the one in docs/figures.md)."""
    names = [
        k.removeprefix("shipped_").removesuffix("_at_target")
        for k in out
        if k.startswith("shipped_") and k.endswith("_at_target")
    ]
    lines = [
        "| policy | shipped: at target | shipped: x optimum | held-out: at target (median / worst) "
        "| held-out: x optimum (median / worst) |",
        "|---|---|---|---|---|",
    ]
    for n in names:
        h = f"held_out_{n}"
        held_a = (
            f"{out[h + '_at_target_median']:.2%} / {out[h + '_at_target_worst']:.2%}"
            if h + "_at_target_median" in out
            else "-"
        )
        held_c = (
            f"{out[h + '_x_optimum_median']:.3f} / {out[h + '_x_optimum_worst']:.3f}"
            if h + "_x_optimum_median" in out
            else "-"
        )
        lines.append(
            f"| {NAMES.get(n, n)} | {out[f'shipped_{n}_at_target']:.2%} | {out[f'shipped_{n}_x_optimum']:.3f} "
            f"| {held_a} | {held_c} |"
        )
    frontier_ = [
        k.removeprefix("frontier_").removesuffix("_at_target")
        for k in out
        if k.startswith("frontier_") and k.endswith("_at_target")
    ]
    if frontier_:
        lines += ["", "| ours on the shipped trace, per setting | at target | x optimum |", "|---|---|---|"]
        lines += [
            f"| {NAMES.get(n, n)} | {out[f'frontier_{n}_at_target']:.2%} | {out[f'frontier_{n}_x_optimum']:.3f} |"
            for n in frontier_
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    from figures import print_and_save

    figures = main()
    print_and_save(figures, RESULTS)
    print(table(figures))
